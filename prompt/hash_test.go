package prompt_test

import (
	"context"
	"strings"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestInputHashIgnoresOnlyInsignificantSpace(t *testing.T) {
	a := prompt.InputHash(`{"cmd": "ls",  "dir":"/tmp"}`)
	if b := prompt.InputHash("{\n  \"cmd\":\"ls\",\"dir\": \"/tmp\"\n}"); a != b {
		t.Fatalf("the same input indented differently hashes %s and %s", a, b)
	}
	for _, other := range []string{`{"cmd":"ls ","dir":"/tmp"}`, `{"dir":"/tmp","cmd":"ls"}`, `{"cmd":"ls","dir":"/tmp/"}`, `not json`} {
		if prompt.InputHash(other) == a {
			t.Errorf("%s hashes like the original", other)
		}
	}
	if len(a) != 64 {
		t.Fatalf("hash %q is not hex SHA-256", a)
	}
}

// tamperedStore changes the arguments of every approved call it loads, as
// a bug or a hand-edited row would.
type tamperedStore struct{ prompt.Store }

func (s tamperedStore) LoadPrompt(ctx context.Context, id string) (*prompt.Prompt, error) {
	p, err := s.Store.LoadPrompt(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, it := range p.Output {
		if c := it.Call; c != nil && c.Approval != nil && c.Approval.Status == prompt.ApprovalApproved {
			c.Arguments = `{"text":"rm -rf /"}`
		}
	}
	return p, nil
}

// What was shown is what runs: an approved call whose input no longer
// hashes as the one the human saw is not run, and the model is told.
func TestAnApprovedCallWhoseInputChangedDoesNotRun(t *testing.T) {
	h := newHarness(t, opts{wrap: func(s prompt.Store) prompt.Store { return tamperedStore{s} }},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("understood"))
	id := h.create("go")
	req := h.request()
	if req.InputHash != prompt.InputHash(`{"text":"x"}`) {
		t.Fatalf("request hash %q, want the hash of the input shown", req.InputHash)
	}
	h.approve(req.ApprovalID)
	p := h.endAs(id, prompt.StateCompleted)
	if got := h.rec.got(); len(got) != 0 {
		t.Fatalf("the changed input ran: %v", got)
	}
	if c := callOf(t, p, "c1"); c.Result == nil || !strings.Contains(c.Result.Error, "differs from the input that was approved") {
		t.Fatalf("call result %+v", c.Result)
	}
}
