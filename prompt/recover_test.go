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

func recoverNow(t testing.TB, h *harness) *prompt.Waiting {
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

// pageAll reads every page of w, checking no request comes twice.
func pageAll(t testing.TB, w *prompt.Waiting) (map[string]prompt.ApprovalRequest, int) {
	t.Helper()
	all := map[string]prompt.ApprovalRequest{}
	pages := 0
	for {
		page, err := w.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return all, pages
		}
		pages++
		for _, r := range page {
			if _, dup := all[r.ApprovalID]; dup {
				t.Fatalf("request %s listed twice", r.ApprovalID)
			}
			all[r.ApprovalID] = r
		}
	}
}

func TestWaitingPagesEveryRequestOnceAndNotAResumedPromptThatPauses(t *testing.T) {
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
	// resumed, and is announced then rather than listed.
	seed(t, mem, &prompt.Prompt{ID: "r1", State: prompt.StateRunning, Input: "go"})
	add(150, 250)
	seed(t, mem, &prompt.Prompt{ID: "d1", State: prompt.StateCompleted, Input: "old"})

	h := newHarness(t, opts{mem: mem}, prompttest.Calls(call("c9", "test.gated", "y")))
	w := recoverNow(t, h)
	if w.Resumed != 1 {
		t.Fatalf("resumed %d, want 1", w.Resumed)
	}
	resumed := h.request() // paused before the later pages are read
	if resumed.PromptID != "r1" {
		t.Fatalf("announced %+v", resumed)
	}
	all, pages := pageAll(t, w)
	if pages != 3 {
		t.Errorf("%d pages, want 3 of at most 100", pages)
	}
	if _, listed := all[resumed.ApprovalID]; listed {
		t.Fatal("the resumed prompt's request was both announced and listed")
	}
	if len(all) != len(want) {
		t.Fatalf("listed %d requests, want %d", len(all), len(want))
	}
	for aid, pid := range want {
		r, ok := all[aid]
		if !ok || r.PromptID != pid || r.ToolCallID != "c1" || r.ToolName != "test.gated" || r.Reason != "it is risky" ||
			r.ConversationID != "conv-"+pid {
			t.Fatalf("request %s = %+v, %v", aid, r, ok)
		}
	}
	// A listed request still works.
	h.script.Add(prompttest.Answer("done"))
	h.approve("a000000000000007")
	p := h.endAs("w007", prompt.StateCompleted)
	if got := h.rec.got(); len(got) != 1 || callOf(t, p, "c1").Result.Output != "echo x" {
		t.Fatalf("ran %v", got)
	}
}

func TestWaitingPagesRequestsOfARealRun(t *testing.T) {
	// The same through a service that paused them, with their queued calls.
	mem := prompttest.NewStore()
	first := newHarness(t, opts{mem: mem, noClose: true})
	const n = 120
	for i := range n {
		first.script.Add(prompttest.Calls(call("g", "test.gated", fmt.Sprint(i)), call("q", "test.free", "later")))
	}
	asked := map[string]prompt.ApprovalRequest{}
	for i := range n {
		first.createIn(fmt.Sprint("conv-", i), "go")
	}
	for range n {
		r := first.request()
		asked[r.ApprovalID] = r
	}
	if err := first.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := newHarness(t, opts{mem: mem})
	w := recoverNow(t, second)
	all, _ := pageAll(t, w)
	if w.Resumed != 0 || len(all) != n {
		t.Fatalf("resumed %d, listed %d", w.Resumed, len(all))
	}
	for aid, r := range asked {
		got := all[aid]
		if got.PromptID != r.PromptID || got.ToolCallID != r.ToolCallID || !reflect.DeepEqual(got.Queued, r.Queued) ||
			string(got.Input) != string(r.Input) || !got.RequestedAt.Equal(r.RequestedAt) {
			t.Fatalf("listed %+v, asked %+v", got, r)
		}
	}
}

func TestRecoverLeavesPromptsThisServiceRunsAlone(t *testing.T) {
	// A prompt created in this process is "running" in the store too; a
	// Recover that picked it up would run a second pass on it.
	m := newBlockingModel()
	h := newHarness(t, opts{model: m})
	id := h.create("hi")
	waitFor(t, m.started)
	w := recoverNow(t, h)
	if w.Resumed != 0 {
		t.Fatalf("resumed %d, want 0: the only prompt is already running here", w.Resumed)
	}
	if all, _ := pageAll(t, w); len(all) != 0 {
		t.Fatalf("listed %v", all)
	}
	m.release <- struct{}{}
	h.endAs(id, prompt.StateCompleted)
	nothingOn(t, m.started, "a second model call")
	if p := h.stored(id); p.Turns != 1 {
		t.Fatalf("turns = %d", p.Turns)
	}
}

// failingWaiting fails WaitingPrompts while fail is set.
type failingWaiting struct {
	prompt.Store
	fail *atomic.Bool
}

func (s *failingWaiting) WaitingPrompts(ctx context.Context, cur prompt.Cursor, limit int) ([]*prompt.Prompt, prompt.Cursor, error) {
	if s.fail.Load() {
		return nil, cur, errors.New("disk read error")
	}
	return s.Store.WaitingPrompts(ctx, cur, limit)
}

func TestAFailedRecoverResumesNothingAndCanBeRetried(t *testing.T) {
	mem := prompttest.NewStore()
	seed(t, mem, &prompt.Prompt{ID: "r1", State: prompt.StateRunning, Input: "go"})
	seed(t, mem, waitingPrompt("w1", "aaaaaaaaaaaaaaaa"))
	var fail atomic.Bool
	fail.Store(true)
	h := newHarness(t, opts{mem: mem, wrap: func(s prompt.Store) prompt.Store { return &failingWaiting{Store: s, fail: &fail} }},
		prompttest.Answer("done"))
	if _, err := h.svc.Recover(context.Background()); err == nil {
		t.Fatal("recover succeeded although the waiting prompts could not be read")
	}
	fail.Store(false)
	// Resumed 1 on the retry shows the failed Recover resumed nothing: a
	// prompt it had queued would be skipped now, or no longer running.
	w := recoverNow(t, h)
	all, _ := pageAll(t, w)
	if _, ok := all["aaaaaaaaaaaaaaaa"]; w.Resumed != 1 || len(all) != 1 || !ok {
		t.Fatalf("retry: resumed %d, listed %v", w.Resumed, all)
	}
	h.endAs("r1", prompt.StateCompleted)
	if n := len(h.script.Requests()); n != 1 {
		t.Fatalf("model turns = %d, want 1", n)
	}
}
