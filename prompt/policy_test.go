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

// rulesStub answers every call of a tool with the verdict set for it, and
// records the fields it was shown.
type rulesStub struct {
	verdicts map[string]prompt.Verdict
	fields   chan map[string]string
}

func (r *rulesStub) Check(tool string, fields map[string]string) prompt.Verdict {
	if r.fields != nil {
		r.fields <- fields
	}
	return r.verdicts[tool]
}

func verdict(a prompt.PolicyAction) prompt.Verdict {
	return prompt.Verdict{Action: a, Source: "rules.yaml:3", Why: "because the operator said so"}
}

// TestPolicyRulesThenGrantsThenGateThenMode is the order of issue 13 as a
// table: a deny rule refuses whatever the mode; an ask rule asks even an
// ungated tool (and the mode answers for a person); an allow rule runs a
// gated tool; with no rule the gate decides, and where it would ask the
// mode may answer instead.
func TestPolicyRulesThenGrantsThenGateThenMode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tool   string
		rule   prompt.PolicyAction
		mode   prompt.Mode
		asks   bool   // a request is shown
		runs   bool   // the tool runs without one
		ruling string // kind of the ruling recorded on the call, "" for none
		result string // part of the result the model reads, when it does not run
	}{
		{name: "deny rule", tool: "test.gated", rule: prompt.PolicyDeny, result: "Denied by policy (rules.yaml:3): because the operator said so", ruling: "rule"},
		{name: "deny rule beats auto-approve", tool: "test.free", rule: prompt.PolicyDeny, mode: prompt.ModeAutoApprove, result: "Denied by policy (rules.yaml:3)", ruling: "rule"},
		{name: "ask rule on an ungated tool", tool: "test.free", rule: prompt.PolicyAsk, asks: true},
		{name: "ask rule, auto-approve answers", tool: "test.free", rule: prompt.PolicyAsk, mode: prompt.ModeAutoApprove, runs: true, ruling: "mode"},
		{name: "ask rule, auto-deny answers", tool: "test.free", rule: prompt.PolicyAsk, mode: prompt.ModeAutoDeny, ruling: "mode",
			result: "Denied by policy (APPROVAL_MODE=auto-deny): nobody is asked"},
		{name: "allow rule on a gated tool", tool: "test.gated", rule: prompt.PolicyAllow, runs: true, ruling: "rule"},
		{name: "no rule, gate asks", tool: "test.gated", asks: true},
		{name: "no rule, gate asks, auto-approve", tool: "test.gated", mode: prompt.ModeAutoApprove, runs: true, ruling: "mode"},
		{name: "no rule, gate asks, auto-deny", tool: "test.gated", mode: prompt.ModeAutoDeny, ruling: "mode", result: "nobody is asked"},
		{name: "no rule, ungated, auto-deny runs it", tool: "test.free", mode: prompt.ModeAutoDeny, runs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &rulesStub{verdicts: map[string]prompt.Verdict{}}
			if tc.rule != prompt.PolicyNone {
				stub.verdicts[tc.tool] = verdict(tc.rule)
			}
			h := newHarness(t, opts{policy: stub, mode: tc.mode},
				prompttest.Calls(call("c1", tc.tool, "x")), prompttest.Answer("done"))
			id := h.create("go")
			if tc.asks {
				req := h.request()
				if tc.rule == prompt.PolicyAsk && !strings.Contains(req.Reason, "The operator's rules ask for approval: because the operator said so") {
					t.Errorf("reason %q does not say the rule asked", req.Reason)
				}
				if len(h.rec.got()) != 0 {
					t.Fatal("ran before a decision")
				}
				return
			}
			p := h.endAs(id, prompt.StateCompleted)
			c := callOf(t, p, "c1")
			if ran := len(h.rec.got()) == 1; ran != tc.runs {
				t.Fatalf("ran = %v, want %v (result %+v)", ran, tc.runs, c.Result)
			}
			if c.Approval != nil {
				t.Fatalf("a person was asked: %+v", c.Approval)
			}
			switch {
			case tc.ruling == "" && c.Ruling != nil:
				t.Fatalf("ruling %+v recorded for a call nobody ruled on", c.Ruling)
			case tc.ruling != "" && (c.Ruling == nil || c.Ruling.Kind != tc.ruling || c.Ruling.Allowed != tc.runs):
				t.Fatalf("ruling %+v, want kind %s allowed %v", c.Ruling, tc.ruling, tc.runs)
			}
			if !tc.runs && !strings.Contains(lastToolResults(t, h.script)["c1"], tc.result) {
				t.Fatalf("model read %q, want %q in it", lastToolResults(t, h.script)["c1"], tc.result)
			}
		})
	}
}

// TestAllowRuleCountsAsApproval: the tool learns that its call was
// allowed, and by which rule, as it would of a person's approval.
func TestAllowRuleCountsAsApproval(t *testing.T) {
	got := make(chan prompt.CallInfo, 1)
	tool, err := prompt.NewTool("test.gated", "x", prompt.AlwaysFor[echoIn]("risky"), func(ctx context.Context, in echoIn) (string, error) {
		ci, _ := prompt.CallFromContext(ctx)
		got <- ci
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stub := &rulesStub{verdicts: map[string]prompt.Verdict{"test.gated": verdict(prompt.PolicyAllow)}}
	h := newHarness(t, opts{policy: stub, tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{tool} }},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done"))
	h.create("go")
	ci := waitFor(t, got)
	if !ci.Approved || ci.ApprovedBy != "rules.yaml:3" {
		t.Fatalf("call info %+v, want approved by the rule", ci)
	}
}

// TestRulesSeeFieldsAndDerivedOnes: a rule is shown the call's top-level
// properties (strings as they are, other values as JSON) and what the
// tool derives.
func TestRulesSeeFieldsAndDerivedOnes(t *testing.T) {
	type in struct {
		URL   string `json:"url"`
		Depth int    `json:"depth,omitempty"`
	}
	tool, err := prompt.NewTool("test.fetch", "x", nil, func(context.Context, in) (string, error) { return "ok", nil })
	if err != nil {
		t.Fatal(err)
	}
	tool.Fields = []prompt.Field{{Name: "host", Kind: prompt.FieldHost}}
	tool.Derive = func(json.RawMessage) (map[string]string, error) { return map[string]string{"host": "example.com"}, nil }
	stub := &rulesStub{verdicts: map[string]prompt.Verdict{}, fields: make(chan map[string]string, 1)}
	h := newHarness(t, opts{policy: stub, tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{tool} }},
		prompttest.Calls(prompttest.Call("c1", "test.fetch", `{"url":"https://example.com/a","depth":2}`)), prompttest.Answer("done"))
	h.create("go")
	f := waitFor(t, stub.fields)
	if f["url"] != "https://example.com/a" || f["depth"] != "2" || f["host"] != "example.com" {
		t.Fatalf("fields %v", f)
	}
}

// TestDeniedEditIsRefusedAtOnce: a deny rule applies to what a person
// writes too: the edit is refused and the request stays pending.
func TestDeniedEditIsRefusedAtOnce(t *testing.T) {
	stub := &rulesStub{verdicts: map[string]prompt.Verdict{}}
	h := newHarness(t, opts{policy: stub}, prompttest.Calls(call("c1", "test.gated", "x")))
	h.create("go")
	req := h.request()
	stub.verdicts["test.gated"] = verdict(prompt.PolicyDeny)
	var refused *prompt.EditError
	err := h.svc.Edit(context.Background(), req.ApprovalID, `{"text":"y"}`, "alice")
	if !errors.As(err, &refused) || !strings.Contains(refused.Reason, "the operator's rules deny it (rules.yaml:3)") {
		t.Fatalf("edit: %v", err)
	}
	if _, ref, err := h.svc.Request(context.Background(), req.ApprovalID); err != nil || ref.Status != prompt.ApprovalPending {
		t.Fatalf("after a refused edit: %+v, %v", ref, err)
	}
}

// TestParseMode names what is accepted.
func TestParseMode(t *testing.T) {
	for in, want := range map[string]prompt.Mode{"": prompt.ModeInteractive, "interactive": prompt.ModeInteractive,
		"auto-approve": prompt.ModeAutoApprove, " auto-deny ": prompt.ModeAutoDeny} {
		if got, err := prompt.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"auto", "Interactive", "yes"} {
		if _, err := prompt.ParseMode(bad); err == nil || !strings.Contains(err.Error(), "interactive, auto-approve, auto-deny") {
			t.Errorf("ParseMode(%q): %v", bad, err)
		}
	}
	if _, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(), Mode: "sometimes"}); err == nil {
		t.Error("NewService took an unknown mode")
	}
}
