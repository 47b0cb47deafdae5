package prompt_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// seed saves p into mem as an earlier process left it.
func seed(t testing.TB, mem *prompttest.Store, p *prompt.Prompt) *prompt.Prompt {
	t.Helper()
	if p.ConversationID == "" {
		p.ConversationID = "conv-" + p.ID
	}
	if p.Rev == 0 {
		p.Rev = 1
	}
	p.CreatedAt, p.UpdatedAt = t0, t0
	if err := mem.CreatePrompt(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// toolItem is a call of turn 1 in status st.
func toolItem(id, name, text string, st prompt.CallStatus) prompt.Item {
	return prompt.Item{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
		ID: id, Name: name, Arguments: fmt.Sprintf(`{"text":%q}`, text), Status: st,
	}}
}

// waitingPrompt is a prompt paused on call c1 with approval aid.
func waitingPrompt(id, aid string) *prompt.Prompt {
	it := toolItem("c1", "test.gated", "x", prompt.CallPending)
	it.Call.Approval = &prompt.Approval{ID: aid, Status: prompt.ApprovalPending, Reason: "it is risky", RequestedAt: t0}
	it.Call.Result = &prompt.Result{Type: prompt.ResultPending, Reason: "it is risky"}
	return &prompt.Prompt{ID: id, State: prompt.StateWaiting, Input: "go", Turns: 1, Output: []prompt.Item{it}}
}

func recoverNow(t testing.TB, h *harness) prompt.Recovered {
	t.Helper()
	w, err := h.svc.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestRecoverInterruptsACallFoundExecuting(t *testing.T) {
	mem := prompttest.NewStore()
	seed(t, mem, &prompt.Prompt{ID: "p1", State: prompt.StateRunning, Input: "go", Turns: 1,
		Output: []prompt.Item{toolItem("c1", "test.free", "x", prompt.CallExecuting)}})
	h := newHarness(t, opts{mem: mem}, prompttest.Answer("I could not tell"))
	if w := recoverNow(t, h); w.Resumed != 1 {
		t.Fatalf("resumed %d, want 1", w.Resumed)
	}
	p := h.endAs("p1", prompt.StateCompleted)
	if c := callOf(t, p, "c1"); c.Status != prompt.CallInterrupted || c.Result.Type != prompt.ResultError ||
		c.Result.Error != prompt.InterruptedError {
		t.Fatalf("call = %+v %+v", c, c.Result)
	}
	if len(h.rec.got()) != 0 {
		t.Fatalf("a call that may have run ran again: %v", h.rec.got())
	}
	if got := lastToolResults(t, h.script)["c1"]; got != "Error: "+prompt.InterruptedError {
		t.Fatalf("model saw %q", got)
	}
}

func TestRecoverRunsAnApprovedCallThatNeverStarted(t *testing.T) {
	for _, settled := range []bool{false, true} {
		t.Run(fmt.Sprintf("settled %v", settled), func(t *testing.T) {
			ctx := context.Background()
			mem := prompttest.NewStore()
			seed(t, mem, waitingPrompt("p1", "aaaaaaaaaaaaaaaa"))
			// The press was saved; the process died before (or after)
			// the decision was settled onto the call, before executing.
			if _, err := mem.Decide(ctx, "aaaaaaaaaaaaaaaa", prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: t0}); err != nil {
				t.Fatal(err)
			}
			if settled {
				p, _ := mem.Prompt("p1")
				p.Output[0].Call.Status, p.Output[0].Call.Result = prompt.CallApproved, nil
				p.Rev++
				if err := mem.SavePrompt(ctx, p, []int{0}); err != nil {
					t.Fatal(err)
				}
			}
			h := newHarness(t, opts{mem: mem}, prompttest.Answer("done"))
			if w := recoverNow(t, h); w.Resumed != 1 {
				t.Fatalf("resumed %d", w.Resumed)
			}
			p := h.endAs("p1", prompt.StateCompleted)
			if got := h.rec.got(); !reflect.DeepEqual(got, []string{"test.gated:x"}) {
				t.Fatalf("ran %v, want once", got)
			}
			if c := callOf(t, p, "c1"); c.Status != prompt.CallDone || c.Result.Output != "echo x" || c.Approval.DecidedBy != "alice" {
				t.Fatalf("call = %+v %+v", c, c.Approval)
			}
			nothingOn(t, h.reqs, "a decided call asked again")
		})
	}
}

// resends returns the re-sends in the outbox, by approval, checking none
// is there twice.
func resends(t testing.TB, mem *prompttest.Store) map[string]prompt.OutboxEntry {
	t.Helper()
	all := map[string]prompt.OutboxEntry{}
	for _, e := range mem.Outbox() {
		if !e.Resend {
			continue
		}
		if _, dup := all[e.ApprovalID]; dup {
			t.Fatalf("request %s re-sent twice", e.ApprovalID)
		}
		if e.Kind != prompt.NoticeRequest {
			t.Fatalf("a re-send of kind %s", e.Kind)
		}
		all[e.ApprovalID] = e
	}
	return all
}

func TestRecoverResendsEveryWaitingRequestOnceAndNotAResumedPromptThatPauses(t *testing.T) {
	mem := prompttest.NewStore()
	want := map[string]string{} // approval → prompt
	add := func(from, to int) {
		for i := from; i < to; i++ {
			id, aid := fmt.Sprintf("w%03d", i), fmt.Sprintf("a%015d", i)
			seed(t, mem, waitingPrompt(id, aid))
			want[aid] = id
		}
	}
	add(0, 150)
	// Running when the process died, between waiting ones: it pauses once
	// resumed, and its request is a live notice, not a re-send.
	seed(t, mem, &prompt.Prompt{ID: "r1", State: prompt.StateRunning, Input: "go"})
	add(150, 250)
	seed(t, mem, &prompt.Prompt{ID: "d1", State: prompt.StateCompleted, Input: "old"})

	h := newHarness(t, opts{mem: mem}, prompttest.Calls(call("c9", "test.gated", "y")))
	rec := recoverNow(t, h)
	if rec.Resumed != 1 || rec.Resent != 250 {
		t.Fatalf("recovered %+v, want 1 resumed and 250 re-sent", rec)
	}
	resumed := h.request()
	if resumed.PromptID != "r1" {
		t.Fatalf("announced %+v", resumed)
	}
	all := resends(t, mem)
	if _, listed := all[resumed.ApprovalID]; listed {
		t.Fatal("the resumed prompt's request was re-sent as well as announced")
	}
	live := 0
	for _, e := range mem.Outbox() {
		if !e.Resend && e.Kind == prompt.NoticeRequest && e.ApprovalID == resumed.ApprovalID {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("%d live notices of the resumed prompt's request, want 1", live)
	}
	if len(all) != len(want) {
		t.Fatalf("re-sent %d requests, want %d", len(all), len(want))
	}
	for aid, pid := range want {
		if e, ok := all[aid]; !ok || e.PromptID != pid || e.ConversationID != "conv-"+pid {
			t.Fatalf("re-send of %s = %+v, %v", aid, e, ok)
		}
	}
	// A re-sent request still works.
	h.script.Add(prompttest.Answer("done"))
	h.approve("a000000000000007")
	p := h.endAs("w007", prompt.StateCompleted)
	if got := h.rec.got(); len(got) != 1 || callOf(t, p, "c1").Result.Output != "echo x" {
		t.Fatalf("ran %v", got)
	}
}

// A process that restarts again before the re-sends went out does not
// queue them twice; once they went out, the next start shows them again.
func TestRecoverResendsOnceUntilDelivered(t *testing.T) {
	mem := prompttest.NewStore()
	seed(t, mem, waitingPrompt("w1", "aaaaaaaaaaaaaaaa"))
	if rec := recoverNow(t, newHarness(t, opts{mem: mem})); rec.Resent != 1 {
		t.Fatalf("first start re-sent %d", rec.Resent)
	}
	if rec := recoverNow(t, newHarness(t, opts{mem: mem})); rec.Resent != 0 {
		t.Fatalf("second start re-sent %d before the first went out", rec.Resent)
	}
	for _, e := range mem.Outbox() {
		if err := mem.MarkNotice(context.Background(), e.Seq, ""); err != nil {
			t.Fatal(err)
		}
	}
	if rec := recoverNow(t, newHarness(t, opts{mem: mem})); rec.Resent != 1 {
		t.Fatalf("a start after delivery re-sent %d", rec.Resent)
	}
}

func TestRecoverLeavesPromptsThisServiceRunsAlone(t *testing.T) {
	// A prompt created in this process is "running" in the store too; a
	// Recover that picked it up would run a second pass on it.
	m := newBlockingModel()
	h := newHarness(t, opts{model: m})
	id := h.create("hi")
	waitFor(t, m.started)
	if rec := recoverNow(t, h); rec.Resumed != 0 || rec.Resent != 0 {
		t.Fatalf("recovered %+v, want nothing: the only prompt is already running here", rec)
	}
	m.release <- struct{}{}
	h.endAs(id, prompt.StateCompleted)
	nothingOn(t, m.started, "a second model call")
	if p := h.stored(id); p.Turns != 1 {
		t.Fatalf("turns = %d", p.Turns)
	}
}

// failingResend fails ResendWaiting while fail is set.
type failingResend struct {
	prompt.Store
	fail *atomic.Bool
}

func (s *failingResend) ResendWaiting(ctx context.Context) (int, error) {
	if s.fail.Load() {
		return 0, errors.New("disk read error")
	}
	return s.Store.ResendWaiting(ctx)
}

func TestAFailedRecoverResumesNothingAndCanBeRetried(t *testing.T) {
	mem := prompttest.NewStore()
	seed(t, mem, &prompt.Prompt{ID: "r1", State: prompt.StateRunning, Input: "go"})
	seed(t, mem, waitingPrompt("w1", "aaaaaaaaaaaaaaaa"))
	var fail atomic.Bool
	fail.Store(true)
	h := newHarness(t, opts{mem: mem, wrap: func(s prompt.Store) prompt.Store { return &failingResend{Store: s, fail: &fail} }},
		prompttest.Answer("done"))
	if _, err := h.svc.Recover(context.Background()); err == nil {
		t.Fatal("recover succeeded although the waiting prompts could not be read")
	}
	fail.Store(false)
	// Resumed 1 on the retry shows the failed Recover resumed nothing: a
	// prompt it had queued would be skipped now, or no longer running.
	rec := recoverNow(t, h)
	all := resends(t, mem)
	if _, ok := all["aaaaaaaaaaaaaaaa"]; rec.Resumed != 1 || len(all) != 1 || !ok {
		t.Fatalf("retry: recovered %+v, re-sent %v", rec, all)
	}
	h.endAs("r1", prompt.StateCompleted)
	if n := len(h.script.Requests()); n != 1 {
		t.Fatalf("model turns = %d, want 1", n)
	}
}
