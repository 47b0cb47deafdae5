package mcp_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
	"tollgate/tools/mcp"
)

// TestToolsJoinWithSchemasAndGates: each server's tools join as
// mcp.<server>.<tool> with the server's description and input schema; a
// tool asks unless the server is trusted and marks it read-only, and the
// request says what the server claims of it; a name the agent cannot
// take is left out and logged. The same over stdio and streamable HTTP.
func TestToolsJoinWithSchemasAndGates(t *testing.T) {
	for _, tc := range []struct {
		transport string
		server    func(t *testing.T, name string, trust bool) mcp.Server
	}{
		{"stdio", func(t *testing.T, name string, trust bool) mcp.Server { return stdioServer(t, name, trust, nil) }},
		{"http", func(t *testing.T, name string, trust bool) mcp.Server {
			return mcp.Server{Name: name, URL: httpServer(t, newTestServer(false)), TrustHints: trust}
		}},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			h := start(t, mcp.Config{Servers: []mcp.Server{tc.server(t, "plain", false), tc.server(t, "trusted", true)}}, mcp.Options{})
			for _, st := range h.m.Status() {
				if !st.Up || st.Tools == 0 || st.Err != "" {
					t.Fatalf("status %+v, want up with tools", st)
				}
			}
			echo := h.tool(t, "mcp.plain.echo")
			if echo.Description != "[server plain] says text back" {
				t.Errorf("description %q", echo.Description)
			}
			if _, ok := echo.Schema.Properties["text"]; !ok || echo.Schema.Type != "object" {
				t.Errorf("schema %+v, want the server's object with text", echo.Schema)
			}
			for _, n := range names(h.m.Tools()) {
				if strings.Contains(n, "bad") {
					t.Errorf("tool %s joined; its name has a slash", n)
				}
			}
			if !strings.Contains(h.logs.String(), "bad/name") {
				t.Errorf("the left-out tool is not in the log:\n%s", h.logs)
			}
			for _, row := range []struct {
				tool   string
				effect prompt.Effect
				asks   string // "" for no gate
			}{
				{"mcp.plain.echo", prompt.EffectExecute, "may be destructive"},
				{"mcp.plain.rm", prompt.EffectExecute, "The server marks this tool destructive."},
				{"mcp.plain.touch", prompt.EffectExecute, "not destructive (a hint, not checked)"},
				{"mcp.plain.peek", prompt.EffectExecute, "hints are not trusted"},
				{"mcp.trusted.peek", prompt.EffectRead, ""},
				{"mcp.trusted.rm", prompt.EffectExecute, "The server marks this tool destructive."},
			} {
				tl := h.tool(t, row.tool)
				if tl.Effect != row.effect {
					t.Errorf("%s: effect %s, want %s", row.tool, tl.Effect, row.effect)
				}
				if row.asks == "" {
					if tl.Gate != nil {
						t.Errorf("%s has a gate; a trusted read-only tool needs none", row.tool)
					}
					continue
				}
				req, err := tl.Gate(context.Background(), []byte(`{}`))
				if err != nil || !req.Required || !strings.Contains(req.Reason, row.asks) {
					t.Errorf("%s: gate %+v, %v; want it to ask, saying %q", row.tool, req, err, row.asks)
				}
			}
		})
	}
}

// rules are the operator's: allow count of "ruled", deny rm.
type rules struct{}

func (rules) Check(tool string, fields map[string]string) prompt.Verdict {
	switch {
	case tool == "mcp.web.count" && fields["text"] == "ruled":
		return prompt.Verdict{Action: prompt.PolicyAllow, Source: "test", Why: "count of ruled is fine"}
	case tool == "mcp.web.rm":
		return prompt.Verdict{Action: prompt.PolicyDeny, Source: "test", Why: "never rm"}
	}
	return prompt.Verdict{}
}

// TestServiceAsksRunsApprovedCallOnceAndAppliesRules runs the tools in
// the real prompt service: input that breaks the schema is refused
// before anyone is asked; a call asks, and once approved runs once; the
// operator's rules allow and deny by name and input without asking.
func TestServiceAsksRunsApprovedCallOnceAndAppliesRules(t *testing.T) {
	srv := newTestServer(false)
	var counted atomic.Int32
	sdk.AddTool(srv, &sdk.Tool{Name: "count", Description: "counts calls"},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			counted.Add(1)
			return text("counted " + in.Text), nil, nil
		})
	h := start(t, mcp.Config{Servers: []mcp.Server{{Name: "web", URL: httpServer(t, srv)}}}, mcp.Options{})

	model := prompttest.NewModel(
		prompttest.Calls(prompttest.Call("c1", "mcp.web.count", `{"text":5}`)),
		prompttest.Calls(prompttest.Call("c2", "mcp.web.count", `{"text":"asked"}`)),
		prompttest.Calls(prompttest.Call("c3", "mcp.web.count", `{"text":"ruled"}`), prompttest.Call("c4", "mcp.web.rm", `{"name":"x"}`)),
		prompttest.Answer("done"),
	)
	store := prompttest.NewStore()
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: store, Sources: []prompt.ToolSource{h.m}, Policy: rules{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	reqs := make(chan prompt.ApprovalRequest, 10)
	ended := make(chan prompt.Answer, 10)
	svc.OnApprovalRequested(func(_ context.Context, r prompt.ApprovalRequest) { reqs <- r })
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })

	created, err := svc.Create(context.Background(), "conv", "go")
	if err != nil {
		t.Fatal(err)
	}
	req := receive(t, reqs)
	if req.ToolName != "mcp.web.count" || string(req.Input) != `{"text":"asked"}` || !strings.Contains(req.Reason, "may be destructive") {
		t.Fatalf("request %+v, want the second call, the first refused by its schema", req)
	}
	if err := svc.Approve(context.Background(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	if a := receive(t, ended); a.PromptID != created.PromptID {
		t.Fatalf("ended %+v", a)
	}
	p, err := store.Prompt(created.PromptID)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]string{}
	for _, it := range p.Output {
		if c := it.Call; c != nil && c.Result != nil {
			results[c.ID] = c.Result.Output + c.Result.Error
		}
	}
	for id, want := range map[string]string{
		"c1": "invalid arguments", "c2": "counted asked", "c3": "counted ruled", "c4": "never rm",
	} {
		if !strings.Contains(results[id], want) {
			t.Errorf("call %s: result %q, want %q in it", id, results[id], want)
		}
	}
	if n := counted.Load(); n != 2 {
		t.Errorf("the server ran count %d times, want 2 (the approved call and the ruled one)", n)
	}
	select {
	case r := <-reqs:
		t.Errorf("asked again: %+v", r)
	default:
	}
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatal("nothing arrived")
	}
	var zero T
	return zero
}
