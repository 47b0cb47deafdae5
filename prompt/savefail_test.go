package prompt_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

const cannotSave = "Tollgate could not save this request, so it stopped."

// failWhen fails each save that match says so of, with a disk error.
func failWhen(match func(p *prompt.Prompt) bool) func(*prompt.Prompt, []int) error {
	return func(p *prompt.Prompt, _ []int) error {
		if match(p) {
			return errors.New("disk I/O error")
		}
		return nil
	}
}

// hasCall reports whether p has a call in status st.
func hasCall(p *prompt.Prompt, st prompt.CallStatus) bool {
	for _, it := range p.Output {
		if it.Call != nil && it.Call.Status == st {
			return true
		}
	}
	return false
}

func TestAPauseThatCannotBeSavedAsksNobody(t *testing.T) {
	h := newHarness(t, opts{save: failWhen(func(p *prompt.Prompt) bool { return p.State == prompt.StateWaiting })},
		prompttest.Calls(call("c1", "test.gated", "x")))
	id := h.create("go")
	a := waitFor(t, h.ended)
	if a.PromptID != id || a.State != prompt.StateFailed || a.Error != cannotSave {
		t.Fatalf("ended = %+v", a)
	}
	nothingOn(t, h.reqs, "approval requested although its state was not saved")
	p := h.stored(id)
	c := callOf(t, p, "c1")
	if p.State != prompt.StateFailed || func() bool { _, ok := p.PendingRequest(); return ok }() || c.Status != prompt.CallDone ||
		c.Result.Error != "not run: "+cannotSave || c.Approval != nil {
		t.Fatalf("stored %s, call %+v %+v", p.State, c, c.Result)
	}
	if _, err := h.svc.Active(t.Context(), "conv-1"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("active = %v", err)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran")
	}
}

func TestAModelTurnThatCannotBeSavedEndsThePrompt(t *testing.T) {
	h := newHarness(t, opts{save: failWhen(func(p *prompt.Prompt) bool { return p.Turns == 1 && !p.State.Final() })},
		prompttest.Calls(call("c1", "test.free", "x")))
	id := h.create("go")
	p := h.endAs(id, prompt.StateFailed)
	if p.Error != cannotSave || p.Turns != 0 || len(p.Output) != 0 || len(h.rec.got()) != 0 {
		t.Fatalf("stored %q after %d turns, output %+v, ran %v", p.Error, p.Turns, p.Output, h.rec.got())
	}
}

func TestExecutingThatCannotBeSavedEndsAsNotRun(t *testing.T) {
	// The tool never starts when its executing status cannot be saved; the
	// record (and the approval's audit trail) must not say it ran.
	h := newHarness(t, opts{save: failWhen(func(p *prompt.Prompt) bool { return hasCall(p, prompt.CallExecuting) })},
		prompttest.Calls(call("c1", "test.gated", "x")))
	id := h.create("go")
	h.approve(h.request().ApprovalID)
	p := h.endAs(id, prompt.StateFailed)
	c := callOf(t, p, "c1")
	if p.Error != cannotSave || c.Status != prompt.CallDone || c.Result == nil || c.Result.Error != "not run: "+cannotSave ||
		c.Approval.Status != prompt.ApprovalApproved || c.Approval.Note != "not run: "+cannotSave {
		t.Fatalf("stored %q, call %s %+v, approval %+v", p.Error, c.Status, c.Result, c.Approval)
	}
	if len(h.rec.got()) != 0 {
		t.Fatal("tool ran")
	}
}

func TestAResultThatCannotBeSavedIsNotReportedAsNotRun(t *testing.T) {
	// The tool ran but its result could not be saved: the prompt ends, and
	// the record must not tell a later turn the call never ran.
	var failed atomic.Bool
	h := newHarness(t, opts{save: failWhen(func(p *prompt.Prompt) bool {
		for _, it := range p.Output {
			if c := it.Call; c != nil && c.Status == prompt.CallDone && c.Result.Type == prompt.ResultSuccess && !p.State.Final() {
				return failed.CompareAndSwap(false, true)
			}
		}
		return false
	})}, prompttest.Calls(call("c1", "test.free", "x")), prompttest.Answer("next"))
	id := h.create("go")
	p := h.endAs(id, prompt.StateFailed)
	if p.Error != cannotSave || len(h.rec.got()) != 1 {
		t.Fatalf("stored %q, ran %v", p.Error, h.rec.got())
	}
	c := callOf(t, p, "c1")
	if c.Status != prompt.CallInterrupted || c.Result == nil || c.Result.Error != prompt.InterruptedError {
		t.Errorf("call of an ended prompt = %s %+v, want interrupted: outcome unknown", c.Status, c.Result)
	}
	h.endAs(h.create("again"), prompt.StateCompleted)
	if got := toolResults(t, h.script, 1)["c1"]; strings.Contains(got, "not run") {
		t.Errorf("the next prompt's model was told the call that ran did not: %q", got)
	}
}

func TestAStoreThatSavesNothingLeavesThePromptForTheNextStart(t *testing.T) {
	mem := prompttest.NewStore()
	h := newHarness(t, opts{mem: mem, noClose: true, save: failWhen(func(*prompt.Prompt) bool { return true })},
		prompttest.Answer("lost"))
	id := h.create("go")
	h.idle(id)
	nothingOn(t, h.ended, "an end nobody could save was reported")
	if p := h.stored(id); p.State != prompt.StateRunning || p.Turns != 0 {
		t.Fatalf("stored %+v", p)
	}
	if err := h.svc.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	next := newHarness(t, opts{mem: mem}, prompttest.Answer("found"))
	recoverNow(t, next)
	if p := next.endAs(id, prompt.StateCompleted); p.FinalText() != "found" {
		t.Fatalf("after restart %q", p.FinalText())
	}
}

// historyFails is a store whose History read fails, as a damaged page
// would make it.
type historyFails struct{ prompt.Store }

func (historyFails) History(context.Context, string, string, int) ([]*prompt.Prompt, error) {
	return nil, errors.New("database disk image is malformed")
}

func TestAHistoryThatCannotBeReadEndsThePromptSayingSo(t *testing.T) {
	h := newHarness(t, opts{wrap: func(s prompt.Store) prompt.Store { return historyFails{s} }},
		prompttest.Answer("never asked"))
	id := h.create("go")
	a := waitFor(t, h.ended)
	if a.PromptID != id || a.State != prompt.StateFailed || !strings.Contains(a.Error, "could not read this chat's earlier messages") {
		t.Fatalf("ended = %+v", a)
	}
	if p := h.stored(id); p.State != prompt.StateFailed || p.Turns != 0 {
		t.Fatalf("stored %s after %d turns", p.State, p.Turns)
	}
}
