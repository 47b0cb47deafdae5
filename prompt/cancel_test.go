package prompt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestCancelWhileWaitingRejectsAndEnds(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x"), call("c2", "test.free", "y")))
	id := h.create("go")
	aid := h.request().ApprovalID
	h.idle(id)
	if err := h.svc.Cancel(context.Background(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	// The worker that paused it may not have let go yet (Activity comes
	// first), so the end is awaited here; a prompt no worker has is ended
	// before Cancel returns (TestCancelAQueuedPromptEndsItAtOnce,
	// TestCancelAfterADecisionDuringShutdownEndsThePrompt).
	if a := waitFor(t, h.ended); a.PromptID != id || a.State != prompt.StateFailed || a.Error != "Cancelled by alice." {
		t.Fatalf("ended = %+v", a)
	}
	p := h.stored(id)
	if p.State != prompt.StateFailed || p.Error != "Cancelled by alice." || p.CancelledBy != "alice" {
		t.Fatalf("stored = %s %q", p.State, p.Error)
	}
	c1 := callOf(t, p, "c1")
	if c1.Status != prompt.CallRejected || c1.Result.Error != "Rejected by user: cancelled" ||
		c1.Approval.Status != prompt.ApprovalRejected || c1.Approval.Note != "cancelled" || c1.Approval.DecidedBy != "alice" {
		t.Fatalf("pending call = %+v, approval %+v", c1, c1.Approval)
	}
	if c2 := callOf(t, p, "c2"); c2.Status != prompt.CallDone || c2.Result.Type != prompt.ResultError ||
		c2.Result.Error != "not run: Cancelled by alice." {
		t.Fatalf("queued call = %+v %+v", c2, c2.Result)
	}
	if err := h.svc.Approve(context.Background(), aid, "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("approve after cancel = %v, want ErrNotPending", err)
	}
	if err := h.svc.Cancel(context.Background(), id, "alice"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("second cancel = %v, want ErrNotPending", err)
	}
	if _, err := h.svc.Active(context.Background(), "conv-1"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("active after cancel = %v", err)
	}
	if len(h.rec.got()) != 0 || len(h.script.Requests()) != 1 {
		t.Fatalf("cancelled prompt went on: ran %v, %d model turns", h.rec.got(), len(h.script.Requests()))
	}
	nothingOn(t, h.ended, "a second ended event")
}

func TestCancelUnknownOrEndedPrompt(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Answer("done"))
	if err := h.svc.Cancel(context.Background(), "p_nosuchprompt", "alice"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("cancel unknown = %v, want ErrNotFound", err)
	}
	id := h.create("hi")
	before := h.endAs(id, prompt.StateCompleted)
	if err := h.svc.Cancel(context.Background(), id, "alice"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("cancel ended = %v, want ErrNotPending", err)
	}
	if after := h.stored(id); after.State != prompt.StateCompleted || after.Rev != before.Rev || after.CancelledBy != "" {
		t.Fatalf("a refused cancel changed the prompt: %+v", after)
	}
}

func TestCancelWhileTheModelRuns(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("model ignores ctx %v", ignore), func(t *testing.T) {
			m := newBlockingModel()
			m.ignoreCtx = ignore
			// An answer that would run a tool, were it kept.
			m.resp = prompt.Response{Text: "running it", ToolCalls: []prompt.ToolCall{call("c1", "test.free", "x")}}
			h := newHarness(t, opts{model: m})
			id := h.create("slow")
			waitFor(t, m.started)
			if err := h.svc.Cancel(context.Background(), id, "alice"); err != nil {
				t.Fatal(err)
			}
			if ignore {
				m.release <- struct{}{}
			}
			a := waitFor(t, h.ended)
			if a.PromptID != id || a.State != prompt.StateFailed || a.Error != "Cancelled by alice." {
				t.Fatalf("ended = %+v", a)
			}
			p := h.stored(id)
			if p.Turns != 0 || len(p.Output) != 0 || len(h.rec.got()) != 0 {
				t.Fatalf("the cancelled turn's answer was kept: %d turns, output %+v, ran %v", p.Turns, p.Output, h.rec.got())
			}
			nothingOn(t, m.started, "the model was asked again")
		})
	}
}

func TestCancelWhileAToolRunsRecordsItsResultThenEnds(t *testing.T) {
	rec := newRecorder()
	rec.block = make(chan struct{}) // never closed: only the cancel ends the tool
	h := newHarness(t, opts{rec: rec}, prompttest.Calls(call("c1", "test.free", "x"), call("c2", "test.free", "y")),
		prompttest.Answer("never"))
	ctxErr := make(chan error, 1)
	h.svc.OnEnded(func(ctx context.Context, _ prompt.Answer) { ctxErr <- ctx.Err() })
	id := h.create("go")
	waitFor(t, rec.started)
	if err := h.svc.Cancel(context.Background(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	if a := waitFor(t, h.ended); a.PromptID != id || a.State != prompt.StateFailed || a.Error != "Cancelled by alice." {
		t.Fatalf("ended = %+v, want failed as cancelled (not a save failure)", a)
	}
	// A listener may send the answer with the ctx it is given.
	if err := waitFor(t, ctxErr); err != nil {
		t.Fatalf("ended listener got a dead context: %v", err)
	}
	p := h.stored(id)
	if c := callOf(t, p, "c1"); c.Status != prompt.CallDone || c.Result == nil || c.Result.Type != prompt.ResultError ||
		!strings.Contains(c.Result.Error, "cancelled") {
		t.Fatalf("call c1 = %+v %+v: the tool's result was not recorded", c, c.Result)
	}
	if c := callOf(t, p, "c2"); c.Status != prompt.CallDone || c.Result.Error != "not run: Cancelled by alice." {
		t.Fatalf("call c2 = %+v %+v", c, c.Result)
	}
	if got := h.rec.got(); len(got) != 1 || len(h.script.Requests()) != 1 {
		t.Fatalf("ran %v after %d model turns", got, len(h.script.Requests()))
	}
}

func TestCancelDuringTheGateNeverPauses(t *testing.T) {
	// The gate is where the pass is when Cancel lands; the gate ignores
	// ctx and says "required": the prompt must end, not ask a human.
	inGate, release := make(chan struct{}), make(chan struct{})
	tools := func(r *recorder) []*prompt.Tool {
		return []*prompt.Tool{r.tool(t, "test.gated", func(context.Context, echoIn) (prompt.Requirement, error) {
			close(inGate)
			<-release
			return prompt.Requirement{Required: true, Reason: "risky"}, nil
		})}
	}
	h := newHarness(t, opts{tools: tools}, prompttest.Calls(call("c1", "test.gated", "x")))
	id := h.create("go")
	waitClosed(t, inGate, "gate")
	if err := h.svc.Cancel(context.Background(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	close(release)
	p := h.endAs(id, prompt.StateFailed)
	if p.Error != "Cancelled by alice." {
		t.Fatalf("error %q", p.Error)
	}
	if c := callOf(t, p, "c1"); c.Approval != nil || c.Status != prompt.CallDone {
		t.Fatalf("call = %+v", c)
	}
	nothingOn(t, h.reqs, "a cancelled prompt asked for approval")
}

func TestCancelAQueuedPromptEndsItAtOnce(t *testing.T) {
	m := newBlockingModel()
	h := newHarness(t, opts{model: m, workers: 1})
	busy := h.createIn("conv-1", "first")
	waitFor(t, m.started)
	queued := h.createIn("conv-2", "second")
	if err := h.svc.Cancel(context.Background(), queued, "alice"); err != nil {
		t.Fatal(err)
	}
	// Ended before Cancel returned, not behind the prompt in the way.
	if p := h.stored(queued); p.State != prompt.StateFailed || p.Error != "Cancelled by alice." {
		t.Fatalf("queued prompt = %s %q", p.State, p.Error)
	}
	if a := waitFor(t, h.ended); a.PromptID != queued {
		t.Fatalf("ended first: %+v", a)
	}
	m.release <- struct{}{}
	h.endAs(busy, prompt.StateCompleted)
	nothingOn(t, m.started, "the cancelled prompt reached the model")
}

func TestCancelRacingTheStartOfAPrompt(t *testing.T) {
	// /cancel may land at any point of a prompt's first steps: whenever
	// Cancel succeeds the prompt ends cancelled, otherwise it had ended.
	model := prompt.ModelFunc(func(context.Context, prompt.Request) (prompt.Response, error) {
		return prompt.Response{Text: "done"}, nil
	})
	h := newHarness(t, opts{model: model, workers: 2})
	const n = 300
	cancelled := map[string]bool{}
	for i := range n {
		id := h.createIn(fmt.Sprint("conv-", i), "go")
		err := h.svc.Cancel(context.Background(), id, "alice")
		switch {
		case err == nil:
			cancelled[id] = true
		case !errors.Is(err, prompt.ErrNotPending):
			t.Fatalf("cancel %d: %v", i, err)
		}
	}
	for range n {
		a := waitFor(t, h.ended)
		want := prompt.Answer{PromptID: a.PromptID, ConversationID: a.ConversationID, State: prompt.StateCompleted, Text: "done"}
		if cancelled[a.PromptID] {
			want = prompt.Answer{PromptID: a.PromptID, ConversationID: a.ConversationID, State: prompt.StateFailed, Error: "Cancelled by alice."}
		}
		if a != want {
			t.Fatalf("ended %+v, want %+v", a, want)
		}
	}
	nothingOn(t, h.ended, "a prompt ended twice")
}

// Stop is Cancel by the request's own button, keyed by the approval.
func TestStopAtARequestEndsItsPrompt(t *testing.T) {
	h := newHarness(t, opts{}, prompttest.Calls(call("c1", "test.gated", "x"), call("c2", "test.free", "y")))
	id := h.create("go")
	req := h.request()
	if err := h.svc.Stop(context.Background(), "nope", "alice"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("stop at an unknown approval: %v", err)
	}
	if err := h.svc.Stop(context.Background(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	p := h.endAs(id, prompt.StateFailed)
	if p.Error != "Cancelled by alice." || len(h.rec.got()) != 0 {
		t.Fatalf("ended %q, ran %v", p.Error, h.rec.got())
	}
	if err := h.svc.Stop(context.Background(), req.ApprovalID, "bob"); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("a second stop: %v, want ErrNotPending", err)
	}
}
