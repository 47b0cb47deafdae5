package prompt_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

type chainIn struct {
	Command string `json:"command"`
}

// chainTool splits its command at "&&", as a shell tool splits a chain,
// and marks a part starting with "$" dynamic.
func chainTool(t *testing.T, ran chan string) *prompt.Tool {
	t.Helper()
	tool, err := prompt.NewTool("test.chain", "x", nil, func(ctx context.Context, in chainIn) (string, error) {
		ran <- in.Command
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tool.Effect = prompt.EffectExecute
	tool.Parts = func(input json.RawMessage) ([]prompt.Part, error) {
		var in chainIn
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, err
		}
		var parts []prompt.Part
		for _, p := range strings.Split(in.Command, "&&") {
			p = strings.TrimSpace(p)
			parts = append(parts, prompt.Part{Label: p, Fields: map[string]string{"command": p}, Dynamic: strings.HasPrefix(p, "$")})
		}
		return parts, nil
	}
	return tool
}

// globRules allows "git status" and "ls*", denies "rm*", asks for "curl*".
type globRules struct{}

func (globRules) Check(tool string, f map[string]string) prompt.Verdict {
	c := f["command"]
	switch {
	case strings.HasPrefix(c, "rm"):
		return prompt.Verdict{Action: prompt.PolicyDeny, Source: "r:1", Why: "no deleting"}
	case strings.HasPrefix(c, "curl"):
		return prompt.Verdict{Action: prompt.PolicyAsk, Source: "r:2", Why: "network"}
	case c == "git status" || strings.HasPrefix(c, "ls"):
		return prompt.Verdict{Action: prompt.PolicyAllow, Source: "r:3", Why: "harmless"}
	}
	return prompt.Verdict{}
}

// TestPartsAreJudgedOneByOne: a chain runs without asking only if every
// part is allowed; one denied part denies it; a part no rule allows, or a
// dynamic one, asks, and the request marks which parts are allowed. A
// tool that executes asks by default, without a gate of its own.
func TestPartsAreJudgedOneByOne(t *testing.T) {
	for _, tc := range []struct {
		command string
		runs    bool
		denied  string
		asks    []bool // per part: allowed, when it asks
	}{
		{command: "git status && ls -la", runs: true},
		{command: "git status && rm -rf /", denied: "Denied by policy (r:1): rm -rf /: no deleting"},
		{command: "ls && git push", asks: []bool{true, false}},
		{command: "ls && curl x", asks: []bool{true, false}},
		{command: "ls && $CMD", asks: []bool{true, false}},
		{command: "make", asks: []bool{false}},
	} {
		t.Run(tc.command, func(t *testing.T) {
			ran := make(chan string, 1)
			args, _ := json.Marshal(chainIn{Command: tc.command})
			h := newHarness(t, opts{policy: globRules{}, tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{chainTool(t, ran)} }},
				prompttest.Calls(prompttest.Call("c1", "test.chain", string(args))), prompttest.Answer("done"))
			id := h.create("go")
			if tc.asks != nil {
				req := h.request()
				if len(req.Parts) != len(tc.asks) {
					t.Fatalf("parts %+v, want %d", req.Parts, len(tc.asks))
				}
				for i, p := range req.Parts {
					if p.Allowed != tc.asks[i] {
						t.Errorf("part %q allowed = %v, want %v", p.Label, p.Allowed, tc.asks[i])
					}
				}
				return
			}
			h.endAs(id, prompt.StateCompleted)
			select {
			case got := <-ran:
				if !tc.runs {
					t.Fatalf("ran %q", got)
				}
			default:
				if tc.runs {
					t.Fatal("did not run")
				}
			}
			if tc.denied != "" && !strings.Contains(lastToolResults(t, h.script)["c1"], tc.denied) {
				t.Fatalf("model read %q, want %q", lastToolResults(t, h.script)["c1"], tc.denied)
			}
		})
	}
}

// TestPreviewAndExpectTravelWithTheRequest: what the gate wants shown
// (a diff) comes with the request, and what it wants checked reaches the
// tool when the approved call runs.
func TestPreviewAndExpectTravelWithTheRequest(t *testing.T) {
	got := make(chan prompt.CallInfo, 1)
	tool, err := prompt.NewTool("test.write", "x",
		func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{Required: true, Reason: "writes", Preview: "--- a\n+++ b\n", PreviewName: "change.diff", Expect: "sha-of-a"}, nil
		},
		func(ctx context.Context, in echoIn) (string, error) {
			ci, _ := prompt.CallFromContext(ctx)
			got <- ci
			return "written", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, opts{tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{tool} }},
		prompttest.Calls(call("c1", "test.write", "x")), prompttest.Answer("done"))
	h.create("go")
	req := h.request()
	if req.Preview != "--- a\n+++ b\n" || req.PreviewName != "change.diff" {
		t.Fatalf("request preview %q %q", req.Preview, req.PreviewName)
	}
	if r, _, err := h.svc.Request(context.Background(), req.ApprovalID); err != nil || r.Preview != req.Preview {
		t.Fatalf("Request: %q, %v", r.Preview, err)
	}
	h.approve(req.ApprovalID)
	if ci := waitFor(t, got); ci.Expect != "sha-of-a" || !ci.Approved {
		t.Fatalf("call info %+v", ci)
	}
}

// TestEffectsSetTheDefaultGate: without a gate, a reading tool never asks
// and any other does; an unknown effect is refused.
func TestEffectsSetTheDefaultGate(t *testing.T) {
	mk := func(name string, e prompt.Effect) *prompt.Tool {
		tool, err := prompt.NewTool(name, "x", nil, func(context.Context, echoIn) (string, error) { return "ok", nil })
		if err != nil {
			t.Fatal(err)
		}
		tool.Effect = e
		return tool
	}
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(),
		Tools: []*prompt.Tool{mk("t.read", prompt.EffectRead), mk("t.plain", ""), mk("t.write", prompt.EffectWrite), mk("t.send", prompt.EffectSend)}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"t.read": false, "t.plain": false, "t.write": true, "t.send": true}
	for _, s := range svc.Summaries() {
		if s.Asks != want[s.Name] {
			t.Errorf("%s (%s): asks = %v", s.Name, s.Effect, s.Asks)
		}
	}
	if _, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(),
		Tools: []*prompt.Tool{mk("t.odd", "delete")}}); err == nil || !strings.Contains(err.Error(), "effect") {
		t.Errorf("unknown effect: %v", err)
	}
}

// TestAnEditWithADeniedPartIsRefused: an edit is refused, and the request
// left as it was, when a deny rule covers one part of the edited call, as
// when one covers the whole: accepted, it would close the request and the
// edited call would only be denied, never asked.
func TestAnEditWithADeniedPartIsRefused(t *testing.T) {
	ran := make(chan string, 1)
	args, _ := json.Marshal(chainIn{Command: "ls && git push"})
	h := newHarness(t, opts{policy: globRules{}, tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{chainTool(t, ran)} }},
		prompttest.Calls(prompttest.Call("c1", "test.chain", string(args))), prompttest.Answer("done"))
	ctx := context.Background()
	id := h.create("go")
	req := h.request()
	h.idle(id)
	edited, _ := json.Marshal(chainIn{Command: "ls && rm -rf /"})
	err := h.svc.Edit(ctx, req.ApprovalID, string(edited), "bob")
	var ee *prompt.EditError
	if !errors.As(err, &ee) || !strings.Contains(ee.Reason, "deny") || !strings.Contains(ee.Reason, "rm -rf /") {
		t.Fatalf("edit = %v, want an EditError naming the denied part", err)
	}
	if ref, _ := h.svc.LookupApproval(ctx, req.ApprovalID); ref.Status != prompt.ApprovalPending {
		t.Fatalf("approval after a refused edit: %+v", ref)
	}
	h.approve(req.ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	if got := waitFor(t, ran); got != "ls && git push" {
		t.Fatalf("ran %q, want the command as asked", got)
	}
}
