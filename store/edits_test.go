package store_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"tollgate/prompt"
)

// An edit closes the request as edited, keeping what was written; the
// call shows it until the edited call asks again under an approval of its
// own, which the loaded prompt then shows, while the old request still
// reads as it was shown. A call has one live approval at most.
func TestEditedApprovalsOnSQLite(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	const old, fresh = "appr0000000000001", "appr0000000000002"
	p := gatedPrompt("p1", "c", old)
	p.Output[1].Call.Approval.InputHash = prompt.InputHash(p.Output[1].Call.Arguments)
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	const edited = `{"cmd":"ls /var/log/x"}`
	at := t0.Add(time.Minute)
	ref, err := db.Decide(ctx, old, prompt.Decision{Status: prompt.ApprovalEdited, By: "alice", At: at, Note: "edited", Input: edited})
	if err != nil {
		t.Fatal(err)
	}
	if ref.Status != prompt.ApprovalEdited || ref.DecidedBy != "alice" || ref.Input != `{"cmd": "rm -rf /var/log/x"}` {
		t.Fatalf("edit ref = %+v", ref)
	}
	if _, err := db.Decide(ctx, old, prompt.Decision{Status: prompt.ApprovalApproved, By: "bob", At: at}); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("approve an edited request: %v", err)
	}

	got, err := db.LoadPrompt(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	a := got.Output[1].Call.Approval
	if a == nil || a.ID != old || a.Status != prompt.ApprovalEdited || a.EditedInput != edited || a.DecidedBy != "alice" {
		t.Fatalf("loaded approval after the edit: %+v", a)
	}
	if got.State != prompt.StateRunning || got.Rev != 2 {
		t.Fatalf("prompt after the edit: %s rev %d", got.State, got.Rev)
	}

	// The step that settles it, then the one that asks again, as the
	// service takes them.
	settled := next(got)
	c := settled.Output[1].Call
	c.Status, c.Result = prompt.CallQueued, nil
	c.Edit = &prompt.Edit{Arguments: a.EditedInput, By: a.DecidedBy, At: a.DecidedAt, ApprovalID: a.ID}
	if err := db.SavePrompt(ctx, settled, []int{1}); err != nil {
		t.Fatal(err)
	}
	if got, _ = db.LoadPrompt(ctx, "p1"); got.Output[1].Call.Approval.ID != old || got.Output[1].Call.Edit == nil {
		t.Fatalf("settled call: %+v", got.Output[1].Call)
	}
	asked := next(got)
	c = asked.Output[1].Call
	c.Status = prompt.CallPending
	c.Approval = &prompt.Approval{ID: fresh, Status: prompt.ApprovalPending, Reason: "edited", RequestedAt: at,
		InputHash: prompt.InputHash(edited)}
	c.Result = &prompt.Result{Type: prompt.ResultPending, Reason: "edited"}
	asked.State = prompt.StateWaiting
	if err := db.SavePrompt(ctx, asked, []int{1}); err != nil {
		t.Fatal(err)
	}
	got, err = db.LoadPrompt(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if want := inUTC(asked); !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded after asking again:\n%+v\nwant\n%+v", got.Output[1].Call, want.Output[1].Call)
	}
	req, ok := got.PendingRequest()
	if !ok || req.ApprovalID != fresh || string(req.Input) != edited || req.Edit == nil {
		t.Fatalf("pending request after asking again: %+v, %v", req, ok)
	}
	if active, err := db.ActivePrompt(ctx, "c"); err != nil || active.Output[1].Call.Approval.ID != fresh {
		t.Fatalf("active prompt's approval: %+v, %v", active, err)
	}

	oldRef, err := db.FindApproval(ctx, old)
	if err != nil || oldRef.Status != prompt.ApprovalEdited || oldRef.Input != `{"cmd": "rm -rf /var/log/x"}` ||
		oldRef.InputHash != prompt.InputHash(`{"cmd": "rm -rf /var/log/x"}`) || oldRef.CallID != "c1" {
		t.Fatalf("old request after asking again: %+v, %v", oldRef, err)
	}
	newRef, err := db.FindApproval(ctx, fresh)
	if err != nil || newRef.Status != prompt.ApprovalPending || newRef.Input != edited || newRef.CallID != "c1" ||
		newRef.InputHash != prompt.InputHash(edited) {
		t.Fatalf("new request: %+v, %v", newRef, err)
	}

	// A third approval while the second is live is refused, and so
	// changes nothing.
	third := next(got)
	third.Output[1].Call.Approval = &prompt.Approval{ID: "appr0000000000003", Status: prompt.ApprovalPending,
		Reason: "again", RequestedAt: at}
	if err := db.SavePrompt(ctx, third, []int{1}); err == nil || !strings.Contains(err.Error(), "live approval") {
		t.Fatalf("a second live approval for one call: %v", err)
	}
	if again, _ := db.LoadPrompt(ctx, "p1"); !reflect.DeepEqual(again, got) {
		t.Fatalf("a refused save changed the prompt:\n%+v", again.Output[1].Call.Approval)
	}
	if _, err := db.FindApproval(ctx, "appr0000000000003"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("the refused approval: %v", err)
	}

	// Expiry and reminders see the live request only; a cancel rejects it.
	if err := db.CancelPrompt(ctx, "p1", "bob", at); err != nil {
		t.Fatal(err)
	}
	if r, _ := db.FindApproval(ctx, fresh); r.Status != prompt.ApprovalRejected {
		t.Fatalf("the live request after a cancel: %+v", r)
	}
	if r, _ := db.FindApproval(ctx, old); r.Status != prompt.ApprovalEdited {
		t.Fatalf("the edited request after a cancel: %+v", r)
	}
}

// Edit messages (the ✏️ Edit button's prompt for the new input) are kept
// apart from the copies of a request: each lookup sees only its kind.
func TestEditMessagesAreKeptApartFromRequestCopies(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	const a1, a2 = "appr0000000000001", "appr0000000000002"
	for _, id := range []string{a1, a2} {
		if err := db.CreatePrompt(ctx, gatedPrompt("p"+id, "conv"+id, id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.EditByMessage(ctx, 77, 10); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("no edit message yet: %v", err)
	}
	if err := db.AddApprovalMessage(ctx, a1, 77, 10); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := db.AddEditMessage(ctx, a1, 77, 11); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddApprovalMessage(ctx, a1, 77, 12); err != nil {
		t.Fatal(err)
	}
	if err := db.AddEditMessage(ctx, a2, 77, 13); err != nil {
		t.Fatal(err)
	}

	for m, want := range map[int]string{11: a1, 13: a2} {
		if got, err := db.EditByMessage(ctx, 77, m); err != nil || got != want {
			t.Errorf("edit message %d: %q, %v; want %s", m, got, err, want)
		}
	}
	if _, err := db.EditByMessage(ctx, 77, 10); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("a request copy read as an edit message: %v", err)
	}
	if _, err := db.EditByMessage(ctx, 78, 11); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("edit message of another chat: %v", err)
	}
	if _, err := db.ApprovalByMessage(ctx, 77, 11); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("an edit message read as a request copy: %v", err)
	}
	copies, err := db.ApprovalMessages(ctx, a1)
	if want := []prompt.ApprovalCopy{{ChatID: 77, MessageID: 10}, {ChatID: 77, MessageID: 12}}; err != nil || !reflect.DeepEqual(copies, want) {
		t.Fatalf("request copies of a1 = %v %v; want %v", copies, err, want)
	}
	if _, err := db.ApprovalMessages(ctx, a2); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("an approval with only an edit message has request copies: %v", err)
	}
	if err := db.AddEditMessage(ctx, "missing", 77, 50); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("edit message of an unknown approval: %v", err)
	}
	if err := db.AddEditMessage(ctx, a2, 77, 11); err == nil || !strings.Contains(err.Error(), a1) {
		t.Errorf("edit message already asking for another approval: %v", err)
	}
	if got, _ := db.EditByMessage(ctx, 77, 11); got != a1 {
		t.Errorf("message 11 now edits %s", got)
	}
}
