package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
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
	p := GatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	req := prompt.Notice{Kind: prompt.NoticeRequest, ConversationID: "c", PromptID: "p1", ApprovalID: "appr0000000000001"}
	stale := next(p)
	stale.Rev = 5
	if err := db.SavePrompt(ctx, stale, nil, req); !errors.Is(err, prompt.ErrConflict) {
		t.Fatalf("stale save: %v", err)
	}
	due, err := db.DueNotices(ctx, T0, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("a refused save recorded notices: %v, %v", describe(due), err)
	}
	if err := db.SavePrompt(ctx, next(p), nil, req); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Decide(ctx, "appr0000000000001", prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: T0}); err != nil {
		t.Fatal(err)
	}
	// One conversation: only its oldest undelivered notice is due.
	due, _ = db.DueNotices(ctx, T0, 10)
	if got, want := describe(due), []string{"c request appr0000000000001"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("due = %v, want %v", got, want)
	}
	if err := db.MarkNotice(ctx, due[0].Seq, ""); err != nil {
		t.Fatal(err)
	}
	due, _ = db.DueNotices(ctx, T0, 10)
	if got, want := describe(due), []string{"c decided appr0000000000001"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the request went out: %v, want %v", got, want)
	}
}

func testCancelRecordsTheOutcomeOfThePendingApproval(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if err := db.CreatePrompt(ctx, GatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p1", "alice", T0); err != nil {
		t.Fatal(err)
	}
	due, _ := db.DueNotices(ctx, T0, 10)
	if got, want := describe(due), []string{"c decided appr0000000000001"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("due = %v, want %v", got, want)
	}
	// A running prompt has no approval to close: nothing is recorded.
	running := &prompt.Prompt{ID: "p2", ConversationID: "d", State: prompt.StateRunning, Rev: 1, CreatedAt: T0, UpdatedAt: T0}
	if err := db.CreatePrompt(ctx, running); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p2", "alice", T0); err != nil {
		t.Fatal(err)
	}
	if due, _ := db.DueNotices(ctx, T0, 10); len(due) != 1 {
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
		if err := db.CreatePrompt(ctx, GatedPrompt(c.id, c.conv, c.appr)); err != nil {
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
	p := &prompt.Prompt{ID: "p3", ConversationID: "c", State: prompt.StateRunning, Rev: 1, CreatedAt: T0, UpdatedAt: T0}
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	done := next(p)
	done.State = prompt.StateCompleted
	if err := db.SavePrompt(ctx, done, nil, prompt.Notice{Kind: prompt.NoticeAnswer, ConversationID: "c", PromptID: "p3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Decide(ctx, "appr000000000000b", prompt.Decision{Status: prompt.ApprovalRejected, By: "bob", At: T0}); err != nil {
		t.Fatal(err)
	}
	due, err := db.DueNotices(ctx, T0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c answer ", "a request appr000000000000a (resend)", "b request appr000000000000b (resend)"}
	if got := describe(due); !reflect.DeepEqual(got, want) {
		t.Fatalf("due = %v, want %v", got, want)
	}
	// Chat a is held by a 429: the others go on, a comes back after it.
	until := T0.Add(3 * time.Second)
	if err := db.HoldNotice(ctx, due[1].Seq, until, "429: retry after 3"); err != nil {
		t.Fatal(err)
	}
	due, _ = db.DueNotices(ctx, T0.Add(time.Second), 10)
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

// A claim gives an outbox entry to one sender until it lapses: another is
// refused meanwhile, the claimer renews it, a hold ends it, and a
// delivered entry cannot be claimed.
func testClaimNoticeIsACompareAndSetThatLapses(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if err := db.CreatePrompt(ctx, GatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p1", "alice", T0); err != nil {
		t.Fatal(err)
	}
	due, err := db.DueNotices(ctx, T0, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due = %v, %v; want one entry", describe(due), err)
	}
	seq, ttl := due[0].Seq, 10*time.Second
	claim := func(holder string, at time.Duration) bool {
		t.Helper()
		ok, err := db.ClaimNotice(ctx, seq, holder, T0.Add(at), ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("a", 0) {
		t.Fatal("a free entry was refused")
	}
	if claim("b", 9*time.Second) {
		t.Fatal("b claimed an entry a holds")
	}
	if !claim("a", 9*time.Second) {
		t.Fatal("a could not renew its claim")
	}
	if claim("b", 18*time.Second) {
		t.Fatal("b claimed an entry whose renewed claim has not lapsed")
	}
	// Lapsed (a died mid-delivery): b takes it, so it is still delivered.
	if !claim("b", 19*time.Second) {
		t.Fatal("b could not claim an entry whose claim lapsed")
	}
	// A hold ends the claim: whoever sends next may claim it.
	if err := db.HoldNotice(ctx, seq, T0.Add(20*time.Second), "429"); err != nil {
		t.Fatal(err)
	}
	if !claim("a", 20*time.Second) {
		t.Fatal("a could not claim an entry held after b's failure")
	}
	if err := db.MarkNotice(ctx, seq, ""); err != nil {
		t.Fatal(err)
	}
	if claim("a", 21*time.Second) || claim("b", time.Hour) {
		t.Fatal("a delivered entry was claimed")
	}
	if _, err := db.ClaimNotice(ctx, seq+1000, "a", T0, ttl); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("claim of no entry: %v, want ErrNotFound", err)
	}
}

// Senders racing for one entry: exactly one claims it.
func testClaimNoticeRaceHasOneWinner(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if err := db.CreatePrompt(ctx, GatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p1", "alice", T0); err != nil {
		t.Fatal(err)
	}
	due, err := db.DueNotices(ctx, T0, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due = %v, %v; want one entry", describe(due), err)
	}
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			ok, err := db.ClaimNotice(ctx, due[0].Seq, fmt.Sprintf("sender-%d", i), T0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Fatalf("%d senders claimed the entry, want 1", n)
	}
}

// Ping answers while the store is open.
func testPingAnswers(t *testing.T, open Opener) {
	if err := open(t, nil).Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
