package prompt_test

import (
	"context"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// policyFunc is a prompt.Policy from a function.
type policyFunc func(tool string, fields map[string]string) prompt.Verdict

func (f policyFunc) Check(tool string, fields map[string]string) prompt.Verdict {
	return f(tool, fields)
}

// auditService runs one prompt that calls test.gated with text "x" under
// policy and mode, and returns the audit of its conversation once it
// ended.
func auditService(t *testing.T, policy prompt.Policy, mode prompt.Mode) []prompt.AuditEntry {
	t.Helper()
	rec := newRecorder()
	mem := prompttest.NewStore()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	svc, err := prompt.NewService(prompt.Config{
		Model: prompttest.NewModel(prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("done")),
		Store: mem, Tools: defaultTools(t)(rec), Policy: policy, Mode: mode,
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan prompt.Answer, 1)
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if _, err := svc.Create(context.Background(), "conv-1", "go"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ended)
	es, err := svc.Audit(context.Background(), prompt.AuditQuery{ConversationID: "conv-1"})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestCallsDecidedWithoutAPersonAreAudited: a rule's deny or allow and the
// mode's refusal each leave one entry naming what decided, through the
// service as it runs.
func TestCallsDecidedWithoutAPersonAreAudited(t *testing.T) {
	rule := func(a prompt.PolicyAction) prompt.Policy {
		return policyFunc(func(tool string, _ map[string]string) prompt.Verdict {
			return prompt.Verdict{Action: a, Source: "rules.yaml:12", Why: "the operator said so"}
		})
	}
	for _, tc := range []struct {
		name   string
		policy prompt.Policy
		mode   prompt.Mode
		want   prompt.AuditEntry
	}{
		{"rule denies", rule(prompt.PolicyDeny), prompt.ModeInteractive, prompt.AuditEntry{
			Outcome: prompt.OutcomeDenied, SourceKind: prompt.SourceRule, Source: "rules.yaml:12", Feedback: "the operator said so"}},
		{"rule allows", rule(prompt.PolicyAllow), prompt.ModeInteractive, prompt.AuditEntry{
			Outcome: prompt.OutcomeAllowed, SourceKind: prompt.SourceRule, Source: "rules.yaml:12", Feedback: "the operator said so"}},
		{"mode denies", nil, prompt.ModeAutoDeny, prompt.AuditEntry{
			Outcome: prompt.OutcomeDenied, SourceKind: prompt.SourceMode, Source: "APPROVAL_MODE=auto-deny", Feedback: "it is risky"}},
		{"mode approves", nil, prompt.ModeAutoApprove, prompt.AuditEntry{
			Outcome: prompt.OutcomeAllowed, SourceKind: prompt.SourceMode, Source: "APPROVAL_MODE=auto-approve", Feedback: "it is risky"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := auditService(t, tc.policy, tc.mode)
			if len(es) != 1 {
				t.Fatalf("%d entries, want 1: %+v", len(es), es)
			}
			e := es[0]
			want := tc.want
			want.Seq, want.At, want.ConversationID, want.PromptID = e.Seq, e.At, "conv-1", e.PromptID
			want.CallID, want.Tool, want.InputHash = "c1", "test.gated", prompt.InputHash(`{"text":"x"}`)
			if e != want || e.PromptID == "" || e.At.IsZero() {
				t.Fatalf("entry\n got %+v\nwant %+v", e, want)
			}
		})
	}
}

// TestAPersonsDecisionIsAuditedThroughTheService: approve and reject
// record the person and the reason.
func TestAPersonsDecisionIsAuditedThroughTheService(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "a")), prompttest.Calls(call("c2", "test.gated", "b")),
		prompttest.Answer("done"))
	id := h.create("go")
	h.approve(h.request().ApprovalID)
	if err := h.svc.Reject(context.Background(), h.request().ApprovalID, "not b", "bob"); err != nil {
		t.Fatal(err)
	}
	h.endAs(id, prompt.StateCompleted)
	es, err := h.svc.Audit(context.Background(), prompt.AuditQuery{ConversationID: "conv-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 {
		t.Fatalf("%d entries, want 2: %+v", len(es), es)
	}
	if e := es[0]; e.CallID != "c2" || e.Outcome != prompt.OutcomeRejected || e.Source != "bob" || e.Feedback != "not b" {
		t.Errorf("newest entry %+v; want bob's rejection of c2", e)
	}
	if e := es[1]; e.CallID != "c1" || e.Outcome != prompt.OutcomeApproved || e.Source != "alice" || e.SourceKind != prompt.SourcePerson {
		t.Errorf("oldest entry %+v; want alice's approval of c1", e)
	}
}
