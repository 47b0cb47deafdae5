package llm

import (
	"encoding/json"
	"fmt"
	"net/http"

	openai "github.com/sashabaranov/go-openai"

	"tollgate/prompt"
)

// Providers refuse a message without content (unless it carries tool
// calls), and go-openai omits an empty content, so empty texts are sent as
// these placeholders.
const (
	emptyToolResult = "(no output)"
	emptyUserText   = "(empty message)"
)

// emptySchema is what a tool without parameters is described with:
// providers want an object schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func (m *Model) request(req prompt.Request) (openai.ChatCompletionRequest, error) {
	creq := openai.ChatCompletionRequest{
		Model:    m.model,
		Messages: make([]openai.ChatCompletionMessage, 0, len(req.Messages)+1),
	}
	if req.System != "" {
		creq.Messages = append(creq.Messages, openai.ChatCompletionMessage{
			Role: openai.ChatMessageRoleSystem, Content: req.System,
		})
	}
	for i, msg := range req.Messages {
		cm, ok, err := message(msg)
		if err != nil {
			return creq, fmt.Errorf("message %d: %w", i, err)
		}
		if ok {
			creq.Messages = append(creq.Messages, cm)
		}
	}
	for _, t := range req.Tools {
		name, err := WireName(t.Name)
		if err != nil {
			return creq, err
		}
		params := t.Parameters
		if len(params) == 0 {
			params = emptySchema
		}
		if !json.Valid(params) {
			return creq, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
		}
		creq.Tools = append(creq.Tools, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        name,
				Description: t.Description,
				Parameters:  params,
			},
		})
	}
	return creq, nil
}

// message maps one message; ok is false for an assistant message with
// nothing in it, which providers refuse and which says nothing anyway.
func message(msg prompt.Message) (openai.ChatCompletionMessage, bool, error) {
	switch msg.Role {
	case prompt.RoleUser:
		text := msg.Text
		if text == "" {
			text = emptyUserText
		}
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: text}, true, nil
	case prompt.RoleAssistant:
		cm := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: msg.Text}
		for _, tc := range msg.ToolCalls {
			name, err := WireName(tc.Name)
			if err != nil {
				// A name the model invented may not encode. Sent as it came,
				// the provider would refuse every later turn of the
				// conversation, so it is made valid instead.
				name = sanitizeName(tc.Name)
			}
			cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
				ID:       tc.ID,
				Type:     openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: name, Arguments: tc.Arguments},
			})
		}
		return cm, msg.Text != "" || len(cm.ToolCalls) > 0, nil
	case prompt.RoleTool:
		if msg.ToolCallID == "" {
			return openai.ChatCompletionMessage{}, false, fmt.Errorf("tool message without a tool call ID")
		}
		text := msg.Text
		if text == "" {
			text = emptyToolResult
		}
		return openai.ChatCompletionMessage{
			Role: openai.ChatMessageRoleTool, Content: text, ToolCallID: msg.ToolCallID,
		}, true, nil
	default:
		return openai.ChatCompletionMessage{}, false, fmt.Errorf("unknown role %q", msg.Role)
	}
}

func (m *Model) response(resp openai.ChatCompletionResponse, attempts int) (prompt.Response, error) {
	if len(resp.Choices) == 0 {
		return prompt.Response{}, &Error{StatusCode: http.StatusOK, Attempts: attempts,
			Msg: fmt.Sprintf("the model endpoint answered without a choice: check LLM_MODEL (%q)", m.model)}
	}
	choice := resp.Choices[0]
	out := prompt.Response{Text: choice.Message.Content}
	for _, tc := range choice.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, prompt.ToolCall{
			ID: tc.ID, Name: localName(tc.Function.Name), Arguments: tc.Function.Arguments,
		})
	}
	// Some servers still answer in the deprecated single function_call.
	if fc := choice.Message.FunctionCall; fc != nil && len(out.ToolCalls) == 0 && fc.Name != "" {
		out.ToolCalls = append(out.ToolCalls, prompt.ToolCall{Name: localName(fc.Name), Arguments: fc.Arguments})
	}
	if out.Text == "" && len(out.ToolCalls) == 0 {
		m.log.Warn("model answered with nothing", "model", m.model, "finish_reason", choice.FinishReason)
	}
	return out, nil
}

// localName decodes a wire name; one that does not decode is kept as the
// model wrote it, so the core can answer "unknown tool" with it.
func localName(wire string) string {
	if name, ok := ToolName(wire); ok {
		return name
	}
	return wire
}

// sanitizeName makes any string a valid wire name, losing information:
// only for names that never were ours.
func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isWireChar(c) && c != '_' {
			b[i] = '-'
		}
	}
	if len(b) > maxWireName {
		b = b[:maxWireName]
	}
	if len(b) == 0 {
		return "unnamed"
	}
	return string(b)
}
