package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store"
)

func TestPromptRoundTripsThroughUnfinishedAndHistory(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := db.UnfinishedPrompts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], inUTC(p)) {
		t.Fatalf("unfinished:\n got %+v\nwant %+v", got, inUTC(p))
	}
	if !got[0].CreatedAt.Equal(p.CreatedAt) || !got[0].Output[1].Call.Approval.RequestedAt.Equal(p.Output[1].Call.Approval.RequestedAt) {
		t.Fatalf("times moved: %v vs %v", got[0].CreatedAt, p.CreatedAt)
	}

	// Finished, it leaves the unfinished set and shows in History.
	q := decided(p, false, "alice")
	if err := db.DecideApproval(ctx, q, "c1"); err != nil {
		t.Fatal(err)
	}
	q = q.Clone()
	q.Rev++
	q.State, q.Error = prompt.StateFailed, "Cancelled by alice."
	q.Output = append(q.Output, prompt.Item{Type: prompt.ItemText, Turn: 2, Rev: q.Rev, Text: "ok"})
	if err := db.SavePrompt(ctx, q); err != nil {
		t.Fatal(err)
	}
	if got, err := db.UnfinishedPrompts(ctx); err != nil || len(got) != 0 {
		t.Fatalf("unfinished after the end = %v, %v", got, err)
	}
	hist, err := db.History(ctx, "conv", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || !reflect.DeepEqual(hist[0], inUTC(q)) {
		t.Fatalf("history:\n got %+v\nwant %+v", hist, inUTC(q))
	}
}

func TestPromptWithoutItemsRoundTrips(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := &prompt.Prompt{ID: "p", ConversationID: "c", State: prompt.StateRunning, Input: "hi", Rev: 1,
		CreatedAt: t0, UpdatedAt: t0}
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := db.UnfinishedPrompts(ctx)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], inUTC(p)) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestSavePromptWritesOnlyItemsAboveStoredRevision(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := p.Clone()
	q.Rev = 4
	q.Output[0].Text = "changed, but Rev not bumped: the store may skip it"
	q.Output[2].Rev = 4
	q.Output[2].Call.Status = prompt.CallExecuting
	if err := db.SavePrompt(ctx, q); err != nil {
		t.Fatal(err)
	}
	got, err := db.UnfinishedPrompts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Output[0].Text != p.Output[0].Text {
		t.Errorf("item 0 rewritten: %q", got[0].Output[0].Text)
	}
	if got[0].Output[2].Call.Status != prompt.CallExecuting || got[0].Rev != 4 {
		t.Errorf("item 2 = %+v, rev %d", got[0].Output[2].Call, got[0].Rev)
	}
}

func TestSavePromptRefusesStaleRevision(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	old := p.Clone()
	old.State = prompt.StateCompleted
	for _, rev := range []int64{p.Rev, p.Rev - 1} {
		old.Rev = rev
		err := db.SavePrompt(ctx, old)
		if !errors.Is(err, store.ErrStaleRevision) {
			t.Errorf("save at rev %d: %v, want ErrStaleRevision", rev, err)
		}
	}
	if got, _ := db.UnfinishedPrompts(ctx); len(got) != 1 || got[0].State != prompt.StateWaiting {
		t.Fatalf("stored state changed: %+v", got)
	}
}

func TestSavePromptRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	if err := db.SavePrompt(ctx, nil); err == nil {
		t.Error("nil prompt saved")
	}
	if err := db.SavePrompt(ctx, &prompt.Prompt{State: prompt.StateRunning}); err == nil {
		t.Error("prompt without ID saved")
	}
	bad := gatedPrompt("p1", "conv", "appr0000000000001")
	bad.State = "dancing"
	if err := db.SavePrompt(ctx, bad); err == nil {
		t.Error("unknown state saved")
	}
}

// A save that fails half-way (here: the second item's approval has no ID,
// after the prompt row and the first item were written) leaves the stored
// prompt exactly as it was.
func TestFailedSaveLeavesStoredPromptIntact(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := p.Clone()
	q.Rev++
	q.Output[0].Rev, q.Output[0].Text = q.Rev, "rewritten"
	q.Output[2].Rev = q.Rev
	q.Output[2].Call.Approval = &prompt.Approval{Reason: "no ID"}
	if err := db.SavePrompt(ctx, q); err == nil || !containsAll(err.Error(), "save prompt p1", "approval without ID") {
		t.Fatalf("save = %v, want a clear error", err)
	}
	got, err := db.UnfinishedPrompts(ctx)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], inUTC(p)) {
		t.Fatalf("after a failed save: %+v, %v", got, err)
	}
	ref, err := db.FindApproval(ctx, "appr0000000000001")
	if err != nil || ref.Status != prompt.CallPending {
		t.Fatalf("approval after a failed save: %+v, %v", ref, err)
	}
}

func TestClosedStoreGivesClearErrors(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.SavePrompt(ctx, decided(p, true, "x")); err == nil || !containsAll(err.Error(), "save prompt p1", "closed") {
		t.Errorf("save on closed store: %v", err)
	}
	if _, err := db.UnfinishedPrompts(ctx); err == nil {
		t.Error("read from a closed store succeeded")
	}
}

func TestDecideApprovalIsCompareAndSet(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	const n = 100
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = db.DecideApproval(ctx, decided(p, i%2 == 0, fmt.Sprintf("user%d", i)), "c1")
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("two winners: %d and %d", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, prompt.ErrNotPending):
			t.Errorf("loser %d: %v, want ErrNotPending", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no winner")
	}
	got, err := db.UnfinishedPrompts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := decided(p, winner%2 == 0, fmt.Sprintf("user%d", winner))
	if !reflect.DeepEqual(got[0], inUTC(want)) {
		t.Fatalf("stored:\n got %+v\nwant %+v", got[0], inUTC(want))
	}
	var by, status string
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	if err := raw.QueryRow(`SELECT decided_by, status FROM approvals WHERE id = 'appr0000000000001'`).Scan(&by, &status); err != nil {
		t.Fatal(err)
	}
	if by != want.Output[1].Call.Approval.DecidedBy || status != string(want.Output[1].Call.Status) {
		t.Fatalf("approval row: %s %s", by, status)
	}
}

func TestDecideApprovalErrors(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := decided(p, true, "bob")
	if err := db.DecideApproval(ctx, q, "nope"); !errors.Is(err, prompt.ErrUnknownCall) {
		t.Errorf("unknown call: %v", err)
	}
	if err := db.DecideApproval(ctx, q, "c2"); !errors.Is(err, prompt.ErrNotPending) {
		t.Errorf("call without approval: %v", err)
	}
	if err := db.DecideApproval(ctx, p, "c1"); err == nil {
		t.Error("a still-pending call was taken as a decision")
	}
	other := decided(gatedPrompt("p1", "conv", "apprUNKNOWN00001"), true, "bob")
	if err := db.DecideApproval(ctx, other, "c1"); !errors.Is(err, prompt.ErrUnknownCall) {
		t.Errorf("approval not stored: %v", err)
	}
	if err := db.DecideApproval(ctx, q, "c1"); err != nil {
		t.Fatal(err)
	}
	again := decided(q, false, "carol")
	again.Output[1].Call.Status = prompt.CallRejected
	if err := db.DecideApproval(ctx, again, "c1"); !errors.Is(err, prompt.ErrNotPending) {
		t.Errorf("second decision: %v", err)
	}
	ref, err := db.FindApproval(ctx, "appr0000000000001")
	if err != nil || ref.Status != prompt.CallApproved {
		t.Errorf("after second decision: %+v, %v", ref, err)
	}
}

func TestFindApproval(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	if err := db.SavePrompt(ctx, gatedPrompt("p1", "conv", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	ref, err := db.FindApproval(ctx, "appr0000000000001")
	want := prompt.ApprovalRef{ID: "appr0000000000001", PromptID: "p1", ConversationID: "conv", CallID: "c1", Status: prompt.CallPending}
	if err != nil || ref != want {
		t.Fatalf("got %+v, %v; want %+v", ref, err, want)
	}
	decidedAt := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	q := decided(gatedPrompt("p1", "conv", "appr0000000000001"), true, "bob")
	q.Output[1].Call.Approval.DecidedAt = decidedAt
	if err := db.DecideApproval(ctx, q, "c1"); err != nil {
		t.Fatal(err)
	}
	ref, err = db.FindApproval(ctx, "appr0000000000001")
	if err != nil || ref.Status != prompt.CallApproved || ref.DecidedBy != "bob" || !ref.DecidedAt.Equal(decidedAt) {
		t.Fatalf("after the decision: %+v, %v", ref, err)
	}
	if _, err := db.FindApproval(ctx, "missing"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestApprovalRowFollowsTheCall(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := decided(p, true, "bob")
	if err := db.DecideApproval(ctx, q, "c1"); err != nil {
		t.Fatal(err)
	}
	for _, st := range []prompt.CallStatus{prompt.CallExecuting, prompt.CallDone} {
		q = q.Clone()
		q.Rev++
		q.Output[1].Rev = q.Rev
		q.Output[1].Call.Status = st
		if err := db.SavePrompt(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var (
		promptID, callID, tool, input, reason, status, by, note string
		decidedAt                                               *string
	)
	err := rawDB(t, path).QueryRow(`SELECT prompt_id, tool_call_id, tool_name, input, reason, status,
		decided_by, decided_at, note FROM approvals WHERE id = 'appr0000000000001'`).
		Scan(&promptID, &callID, &tool, &input, &reason, &status, &by, &decidedAt, &note)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Output[1].Call
	if promptID != "p1" || callID != "c1" || tool != c.Name || input != c.Arguments || reason != c.Approval.Reason ||
		status != "done" || by != "bob" || decidedAt == nil || *decidedAt != t0.Add(time.Minute).UTC().Format(time.RFC3339Nano) {
		t.Fatalf("row: %s %s %s %s %s %s %s %v %s", promptID, callID, tool, input, reason, status, by, decidedAt, note)
	}
}

func TestHistory(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	var ids []string
	for i := range 5 {
		for _, conv := range []string{"a", "b"} {
			id := fmt.Sprintf("%s%d", conv, i)
			p := &prompt.Prompt{ID: id, ConversationID: conv, State: prompt.StateCompleted, Input: id, Rev: 1,
				CreatedAt: t0, UpdatedAt: t0, // equal times: order is the order of saving
				Output: []prompt.Item{{Type: prompt.ItemText, Turn: 1, Rev: 1, Text: "answer " + id}}}
			if err := db.SavePrompt(ctx, p); err != nil {
				t.Fatal(err)
			}
			if conv == "a" {
				ids = append(ids, id)
			}
		}
	}
	tests := []struct {
		before string
		limit  int
		want   []string
	}{
		{"", 10, ids},
		{"", 2, ids[3:]},
		{"a3", 2, ids[1:3]},
		{"a0", 5, nil},
		{"", 0, nil},
	}
	for _, tt := range tests {
		got, err := db.History(ctx, "a", tt.before, tt.limit)
		if err != nil {
			t.Fatalf("before %q limit %d: %v", tt.before, tt.limit, err)
		}
		var gotIDs []string
		for _, p := range got {
			gotIDs = append(gotIDs, p.ID)
			if p.FinalText() != "answer "+p.ID {
				t.Errorf("%s: output %+v", p.ID, p.Output)
			}
		}
		if !reflect.DeepEqual(gotIDs, tt.want) {
			t.Errorf("before %q limit %d: %v, want %v", tt.before, tt.limit, gotIDs, tt.want)
		}
	}
	if _, err := db.History(ctx, "a", "nope", 5); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("unknown beforeID: %v", err)
	}
	// prompt.Store: ErrNotFound if beforeID is not a prompt of that
	// conversation, as MemStore does.
	if got, err := db.History(ctx, "a", "b3", 10); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("beforeID of another conversation: %d prompts, %v; want ErrNotFound", len(got), err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func TestSavePromptCannotDecideAPendingApproval(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.SavePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := db.SavePrompt(ctx, decided(p, true, "mallory")); err == nil {
		t.Fatal("a decision was saved without the compare-and-set")
	}
	other := gatedPrompt("p2", "conv2", "appr0000000000001") // same approval ID, another call
	if err := db.SavePrompt(ctx, other); err == nil {
		t.Fatal("an approval ID was taken over by another prompt")
	}
	ref, err := db.FindApproval(ctx, "appr0000000000001")
	if err != nil || ref.Status != prompt.CallPending || ref.PromptID != "p1" {
		t.Fatalf("approval now %+v, %v", ref, err)
	}
}
