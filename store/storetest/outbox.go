package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"tollgate/prompt"
)

// describe lists entries as "conversation kind approval" strings.
func describe(es []prompt.OutboxEntry) []string {
	var out []string
	for _, e := range es {
		s := e.ConversationID + " " + string(e.Kind) + " " + e.ApprovalID
		if e.Resend {
			s += " (resend)"
		}
		out = append(out, s)
	}
	return out
}

// A notice is recorded with the change that obliges it, or not at all.
func testNoticesAreRecordedWithTheirChange(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := gatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	req := prompt.Notice{Kind: prompt.NoticeRequest, ConversationID: "c", PromptID: "p1", ApprovalID: "appr0000000000001"}
	stale := next(p)
	stale.Rev = 5
	if err := db.SavePrompt(ctx, stale, nil, req); !errors.Is(err, prompt.ErrConflict) {
		t.Fatalf("stale save: %v", err)
	}
	due, err := db.DueNotices(ctx, t0, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("a refused save recorded notices: %v, %v", describe(due), err)
	}
	if err := db.SavePrompt(ctx, next(p), nil, req); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Decide(ctx, "appr0000000000001", prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: t0}); err != nil {
		t.Fatal(err)
	}
	// One conversation: only its oldest undelivered notice is due.
	due, _ = db.DueNotices(ctx, t0, 10)
	if got, want := describe(due), []string{"c request appr0000000000001"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("due = %v, want %v", got, want)
	}
	if err := db.MarkNotice(ctx, due[0].Seq, ""); err != nil {
		t.Fatal(err)
	}
	due, _ = db.DueNotices(ctx, t0, 10)
	if got, want := describe(due), []string{"c decided appr0000000000001"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the request went out: %v, want %v", got, want)
	}
}

func testCancelRecordsTheOutcomeOfThePendingApproval(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p1", "alice", t0); err != nil {
		t.Fatal(err)
	}
	due, _ := db.DueNotices(ctx, t0, 10)
	if got, want := describe(due), []string{"c decided appr0000000000001"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("due = %v, want %v", got, want)
	}
	// A running prompt has no approval to close: nothing is recorded.
	running := &prompt.Prompt{ID: "p2", ConversationID: "d", State: prompt.StateRunning, Rev: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := db.CreatePrompt(ctx, running); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p2", "alice", t0); err != nil {
		t.Fatal(err)
	}
	if due, _ := db.DueNotices(ctx, t0, 10); len(due) != 1 {
		t.Fatalf("due = %v", describe(due))
	}
}

// Each conversation's notices go in order, one at a time; conversations do
// not wait for each other; a held one waits alone; re-sends go last.
func testDueNoticesAreEachConversationsOldestAndResendsLast(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	for _, c := range []struct{ id, conv, appr string }{
		{"w1", "a", "appr000000000000a"}, {"w2", "b", "appr000000000000b"},
	} {
		if err := db.CreatePrompt(ctx, gatedPrompt(c.id, c.conv, c.appr)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.ResendWaiting(ctx); err != nil || n != 2 {
		t.Fatalf("re-sent %d, %v", n, err)
	}
	if n, err := db.ResendWaiting(ctx); err != nil || n != 0 {
		t.Fatalf("a second restart re-sent %d before the first went out, %v", n, err)
	}
	// A live change after the restart, in another chat and in chat b.
	p := &prompt.Prompt{ID: "p3", ConversationID: "c", State: prompt.StateRunning, Rev: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	done := next(p)
	done.State = prompt.StateCompleted
	if err := db.SavePrompt(ctx, done, nil, prompt.Notice{Kind: prompt.NoticeAnswer, ConversationID: "c", PromptID: "p3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Decide(ctx, "appr000000000000b", prompt.Decision{Status: prompt.ApprovalRejected, By: "bob", At: t0}); err != nil {
		t.Fatal(err)
	}
	due, err := db.DueNotices(ctx, t0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c answer ", "a request appr000000000000a (resend)", "b request appr000000000000b (resend)"}
	if got := describe(due); !reflect.DeepEqual(got, want) {
		t.Fatalf("due = %v, want %v", got, want)
	}
	// Chat a is held by a 429: the others go on, a comes back after it.
	until := t0.Add(3 * time.Second)
	if err := db.HoldNotice(ctx, due[1].Seq, until, "429: retry after 3"); err != nil {
		t.Fatal(err)
	}
	due, _ = db.DueNotices(ctx, t0.Add(time.Second), 10)
	if got, want := describe(due), []string{"c answer ", "b request appr000000000000b (resend)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("while a is held: %v, want %v", got, want)
	}
	if at, ok, err := db.NextNoticeAt(ctx); err != nil || !ok || !at.Equal(until.Truncate(time.Millisecond)) {
		t.Fatalf("next held = %v, %v, %v; want %v", at, ok, err, until)
	}
	due, _ = db.DueNotices(ctx, until, 10)
	if len(due) != 3 || due[1].Attempts != 1 {
		t.Fatalf("after the hold: %v (attempts %d)", describe(due), due[1].Attempts)
	}
	if err := db.MarkNotice(ctx, 999, ""); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("mark an unknown entry: %v", err)
	}
	// Once delivered, the next restart shows a still-waiting request again.
	for _, e := range due {
		if err := db.MarkNotice(ctx, e.Seq, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.ResendWaiting(ctx); err != nil || n != 1 {
		t.Fatalf("restart after delivery re-sent %d (want a's only: b was decided), %v", n, err)
	}
}
