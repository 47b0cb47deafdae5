package storetest

import (
	"context"
	"testing"
	"time"

	"tollgate/prompt"
)

// Deadlines live in the approval rows: the next one, what is due, and a
// reminder that goes into the outbox once.
func testApprovalDeadlinesAreKeptInTheRow(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if _, ok, err := db.NextDeadline(ctx); err != nil || ok {
		t.Fatalf("next deadline of an empty store: %v, %v", ok, err)
	}
	p := GatedPrompt("p1", "c", "appr0000000000001")
	a := p.Output[1].Call.Approval
	a.ExpiresAt, a.RemindAt = T0.Add(time.Hour), T0.Add(10*time.Minute)
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := db.LoadPrompt(ctx, "p1")
	// Deadlines are kept to the millisecond.
	ms := func(t time.Time) time.Time { return t.Truncate(time.Millisecond) }
	if err != nil || !got.Output[1].Call.Approval.ExpiresAt.Equal(ms(a.ExpiresAt)) || !got.Output[1].Call.Approval.RemindAt.Equal(ms(a.RemindAt)) {
		t.Fatalf("loaded approval %+v, %v", got.Output[1].Call.Approval, err)
	}
	if at, ok, err := db.NextDeadline(ctx); err != nil || !ok || !at.Equal(ms(a.RemindAt)) {
		t.Fatalf("next deadline = %v, %v, %v; want the reminder", at, ok, err)
	}
	expired, remind, err := db.DueApprovals(ctx, T0.Add(10*time.Minute))
	if err != nil || len(expired) != 0 || len(remind) != 1 || remind[0].ID != a.ID || remind[0].ConversationID != "c" {
		t.Fatalf("due at the reminder: %+v, %+v, %v", expired, remind, err)
	}
	if sent, err := db.Remind(ctx, a.ID); err != nil || !sent {
		t.Fatalf("remind: %v, %v", sent, err)
	}
	if sent, err := db.Remind(ctx, a.ID); err != nil || sent {
		t.Fatalf("second remind: %v, %v; want nothing", sent, err)
	}
	due, _ := db.DueNotices(ctx, T0, 10)
	if len(due) != 1 || !due[0].Resend || due[0].ApprovalID != a.ID {
		t.Fatalf("outbox after the reminder: %v", describe(due))
	}
	expired, _, _ = db.DueApprovals(ctx, T0.Add(time.Hour))
	if len(expired) != 1 {
		t.Fatalf("due at the deadline: %+v", expired)
	}
	if _, err := db.Decide(ctx, a.ID, prompt.Decision{Status: prompt.ApprovalExpired, At: T0.Add(time.Hour), Note: "no decision within 1h"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.NextDeadline(ctx); ok {
		t.Fatal("a decided approval still has a deadline")
	}
}
