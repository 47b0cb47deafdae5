package prompt

import "context"

// Role says who speaks in a message.
type Role string

// The roles of a conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one provider-neutral chat message. The service builds them so
// that every tool call is followed by its result, as providers require.
type Message struct {
	Role       Role
	Text       string
	ToolCalls  []ToolCall // assistant
	ToolCallID string     // tool
}

// ToolCall is a call the model asks for.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text, unchecked
}

// Request is one model turn: the system prompt, the conversation so far
// (earlier prompts, then this one) and the tools on offer.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolDef
}

// Response is the model's answer: text, tool calls, or both. No tool calls
// means the model is done.
type Response struct {
	Text      string
	ToolCalls []ToolCall
}

// Model is a language model. Complete returns an error the user can act on
// when the endpoint fails; the service ends the prompt as failed with it.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req Request) (Response, error)

// Complete calls f.
func (f ModelFunc) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }

// Messages renders prompts as chat messages, oldest first. A call that has
// no result yet (a prompt that failed mid-batch) is reported as not run, so
// the transcript stays well formed.
func Messages(prompts ...*Prompt) []Message {
	var msgs []Message
	for _, p := range prompts {
		msgs = append(msgs, Message{Role: RoleUser, Text: p.Input})
		for i := 0; i < len(p.Output); {
			turn := p.Output[i].Turn
			asst := Message{Role: RoleAssistant}
			var results []Message
			for ; i < len(p.Output) && p.Output[i].Turn == turn; i++ {
				it := p.Output[i]
				switch {
				case it.Type == ItemText:
					if asst.Text != "" {
						asst.Text += "\n"
					}
					asst.Text += it.Text
				case it.Call != nil:
					c := it.Call
					asst.ToolCalls = append(asst.ToolCalls, ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
					results = append(results, Message{Role: RoleTool, ToolCallID: c.ID, Text: resultText(c)})
				}
			}
			msgs = append(msgs, asst)
			msgs = append(msgs, results...)
		}
	}
	return msgs
}

func resultText(c *Call) string {
	if c.Edit != nil {
		return "Note: before deciding, a person edited this call's arguments to " + c.Edit.Arguments +
			" (" + Changes(c.Arguments, c.Edit.Arguments) + "); what follows is the outcome of the edited call.\n" + outcomeText(c)
	}
	return outcomeText(c)
}

func outcomeText(c *Call) string {
	if c.Result == nil {
		return "Error: this call was not run."
	}
	switch c.Result.Type {
	case ResultSuccess:
		return c.Result.Output
	case ResultPending:
		return "Waiting for human approval: " + c.Result.Reason
	default:
		return "Error: " + c.Result.Error
	}
}
