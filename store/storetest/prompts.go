package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"tollgate/prompt"
)

// next returns a copy of p as the following revision, as a step saves it.
func next(p *prompt.Prompt) *prompt.Prompt {
	q := p.Clone()
	q.Rev++
	q.UpdatedAt = q.UpdatedAt.Add(time.Second)
	return q
}

func testPromptRoundTripsWithItsApprovals(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := GatedPrompt("p1", "conv", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := db.LoadPrompt(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	if want := InUTC(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
	}
	active, err := db.ActivePrompt(ctx, "conv")
	if err != nil || !reflect.DeepEqual(active, got) {
		t.Fatalf("active = %+v, %v", active, err)
	}
	if _, err := db.LoadPrompt(ctx, "nope"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("load unknown: %v", err)
	}
	if _, err := db.ActivePrompt(ctx, "other"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("active of another conversation: %v", err)
	}
}

func testPromptWithoutItemsRoundTrips(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := &prompt.Prompt{ID: "p1", ConversationID: "c", State: prompt.StateRunning, Input: "hi", Rev: 1,
		CreatedAt: T0, UpdatedAt: T0}
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := db.LoadPrompt(ctx, "p1")
	if err != nil || !reflect.DeepEqual(got, InUTC(p)) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// The database, not a map in one process, keeps a conversation to one
// unfinished prompt.
func testCreatePromptRefusesASecondUnfinishedPromptInAConversation(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := &prompt.Prompt{ID: "p1", ConversationID: "c", State: prompt.StateRunning, Input: "hi", Rev: 1, CreatedAt: T0, UpdatedAt: T0}
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := db.CreatePrompt(ctx, p); !errors.Is(err, prompt.ErrExists) {
		t.Fatalf("the same prompt again: %v, want ErrExists (not ErrBusy)", err)
	}
	second := &prompt.Prompt{ID: "p2", ConversationID: "c", State: prompt.StateRunning, Input: "again", Rev: 1, CreatedAt: T0, UpdatedAt: T0}
	if err := db.CreatePrompt(ctx, second); !errors.Is(err, prompt.ErrBusy) {
		t.Fatalf("second prompt: %v, want ErrBusy", err)
	}
	other := &prompt.Prompt{ID: "p3", ConversationID: "d", State: prompt.StateRunning, Input: "hi", Rev: 1, CreatedAt: T0, UpdatedAt: T0}
	if err := db.CreatePrompt(ctx, other); err != nil {
		t.Fatalf("another conversation: %v", err)
	}
	done := next(p)
	done.State = prompt.StateCompleted
	if err := db.SavePrompt(ctx, done, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CreatePrompt(ctx, second); err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
}

func testSavePromptIsACompareAndSetOnTheRevision(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := GatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	a := next(p)
	a.Output[0].Text = "first writer"
	b := next(p)
	b.Output[0].Text = "second writer"
	if err := db.SavePrompt(ctx, a, []int{0}); err != nil {
		t.Fatal(err)
	}
	err := db.SavePrompt(ctx, b, []int{0})
	if !errors.Is(err, prompt.ErrConflict) {
		t.Fatalf("second save from the same revision: %v, want ErrConflict", err)
	}
	got, _ := db.LoadPrompt(ctx, "p1")
	if got.Output[0].Text != "first writer" || got.Rev != 2 {
		t.Fatalf("stored %q at rev %d; the loser wrote", got.Output[0].Text, got.Rev)
	}
	skip := next(next(got))
	if err := db.SavePrompt(ctx, skip, nil); !errors.Is(err, prompt.ErrConflict) {
		t.Fatalf("save two revisions ahead: %v, want ErrConflict", err)
	}
	ghost := next(GatedPrompt("ghost", "c", "appr0000000000009"))
	if err := db.SavePrompt(ctx, ghost, nil); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("save of a prompt never created: %v", err)
	}
}

func testSavePromptRejectsBadInput(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := GatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		p       *prompt.Prompt
		changed []int
	}{
		"nil":          {nil, nil},
		"no id":        {&prompt.Prompt{Rev: 2}, nil},
		"no such item": {next(p), []int{7}},
	} {
		if err := db.SavePrompt(ctx, tc.p, tc.changed); err == nil {
			t.Errorf("%s: saved", name)
		}
	}
	got, _ := db.LoadPrompt(ctx, "p1")
	if got.Rev != 1 {
		t.Fatalf("a refused save changed the prompt: rev %d", got.Rev)
	}
}

// A save writes the items it names and no others, so its cost follows what
// changed rather than the prompt's length.
func testSavePromptWritesOnlyTheChangedItems(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := GatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := next(p)
	q.Output[0].Text = "not named: not written"
	q.Output[2].Call.Status = prompt.CallExecuting
	if err := db.SavePrompt(ctx, q, []int{2}); err != nil {
		t.Fatal(err)
	}
	got, _ := db.LoadPrompt(ctx, "p1")
	if got.Output[0].Text != "I will delete them." || got.Output[2].Call.Status != prompt.CallExecuting {
		t.Fatalf("stored items: %q, %s", got.Output[0].Text, got.Output[2].Call.Status)
	}
}

func testANewApprovalMustBePendingAndItsIDUnique(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := GatedPrompt("p1", "c", "appr0000000000001")
	p.Output[1].Call.Approval.Status = prompt.ApprovalApproved
	if err := db.CreatePrompt(ctx, p); err == nil {
		t.Fatal("a prompt created with its approval already approved")
	}
	if _, err := db.LoadPrompt(ctx, "p1"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("the refused create left a prompt: %v", err)
	}
	if err := db.CreatePrompt(ctx, GatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if err := db.CreatePrompt(ctx, GatedPrompt("p2", "d", "appr0000000000001")); err == nil {
		t.Fatal("an approval ID taken by another call was accepted")
	}
}

func testPendingMayExpireWhenItsPromptEnds(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := GatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := next(p)
	q.State = prompt.StateFailed
	q.Output[1].Call.Approval.Status = prompt.ApprovalExpired
	q.Output[1].Call.Approval.Note = "not run: stopped"
	if err := db.SavePrompt(ctx, q, []int{1}); err != nil {
		t.Fatal(err)
	}
	ref, _ := db.FindApproval(ctx, "appr0000000000001")
	if ref.Status != prompt.ApprovalExpired || ref.Note != "not run: stopped" {
		t.Fatalf("approval = %+v", ref)
	}
	if _, err := db.Decide(ctx, ref.ID, prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: T0}); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("decide an expired approval: %v", err)
	}
}

func testDecideIsACompareAndSetThatResumesThePrompt(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	p := GatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	at := T0.Add(time.Minute)
	ref, err := db.Decide(ctx, "appr0000000000001", prompt.Decision{Status: prompt.ApprovalRejected, By: "alice", At: at, Note: "too risky"})
	if err != nil {
		t.Fatal(err)
	}
	want := prompt.ApprovalRef{ID: "appr0000000000001", PromptID: "p1", ConversationID: "c", CallID: "c1",
		Status: prompt.ApprovalRejected, DecidedBy: "alice", DecidedAt: at.UTC(), Note: "too risky",
		ToolName: "shell.run", Input: `{"cmd": "rm -rf /var/log/x"}`, Reason: "runs a shell command", RequestedAt: T0.Add(time.Second).UTC()}
	if !reflect.DeepEqual(ref, want) {
		t.Fatalf("ref = %+v, want %+v", ref, want)
	}
	got, _ := db.LoadPrompt(ctx, "p1")
	if got.State != prompt.StateRunning || got.Rev != 2 {
		t.Fatalf("prompt after a decision: %s rev %d; want running at the next revision", got.State, got.Rev)
	}
	if a := got.Output[1].Call.Approval; a.Status != prompt.ApprovalRejected || a.DecidedBy != "alice" {
		t.Fatalf("loaded approval = %+v", a)
	}
	ref, err = db.Decide(ctx, "appr0000000000001", prompt.Decision{Status: prompt.ApprovalApproved, By: "bob", At: at})
	if !errors.Is(err, prompt.ErrNotPending) || ref.DecidedBy != "alice" {
		t.Fatalf("second decision: %+v, %v; want ErrNotPending with the first decision", ref, err)
	}
	if _, err := db.Decide(ctx, "nope", prompt.Decision{Status: prompt.ApprovalApproved, By: "bob", At: at}); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
	if _, err := db.Decide(ctx, "appr0000000000001", prompt.Decision{Status: prompt.ApprovalPending}); err == nil {
		t.Fatal("pending accepted as a decision")
	}
}

// The decision race: many presses at once, one decision.
func testDecideRaceHasOneWinner(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if err := db.CreatePrompt(ctx, GatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, lost := 0, 0
	for i := range 100 {
		wg.Go(func() {
			d := prompt.Decision{Status: prompt.ApprovalApproved, By: fmt.Sprint("user", i), At: T0}
			if i%2 == 1 {
				d.Status = prompt.ApprovalRejected
			}
			_, err := db.Decide(ctx, "appr0000000000001", d)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, prompt.ErrNotPending):
				lost++
			default:
				t.Errorf("decide: %v", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || lost != 99 {
		t.Fatalf("%d wins, %d lost; want exactly one decision", wins, lost)
	}
	got, _ := db.LoadPrompt(ctx, "p1")
	if got.Rev != 2 {
		t.Fatalf("rev = %d: the prompt moved on more than once", got.Rev)
	}
}

func testCancelPromptRejectsThePendingApproval(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if err := db.CreatePrompt(ctx, GatedPrompt("p1", "c", "appr0000000000001")); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p1", "alice", T0); err != nil {
		t.Fatal(err)
	}
	got, _ := db.LoadPrompt(ctx, "p1")
	if got.CancelledBy != "alice" || got.State != prompt.StateRunning || got.Rev != 2 {
		t.Fatalf("prompt = %s by %q rev %d", got.State, got.CancelledBy, got.Rev)
	}
	if a := got.Output[1].Call.Approval; a.Status != prompt.ApprovalRejected || a.Note != "cancelled" || a.DecidedBy != "alice" {
		t.Fatalf("approval = %+v", a)
	}
	// A second cancel keeps who cancelled first.
	if err := db.CancelPrompt(ctx, "p1", "bob", T0); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.LoadPrompt(ctx, "p1"); got.CancelledBy != "alice" {
		t.Fatalf("cancelled by %q after a second cancel", got.CancelledBy)
	}
	done := next(got)
	done.Rev = 4
	done.State = prompt.StateFailed
	if err := db.SavePrompt(ctx, done, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CancelPrompt(ctx, "p1", "alice", T0); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("cancel an ended prompt: %v", err)
	}
	if err := db.CancelPrompt(ctx, "nope", "alice", T0); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("cancel an unknown prompt: %v", err)
	}
}

// A start pages the running prompts; a listing taken at a restart does not
// run into prompts created after its first page.
func testRunningPromptsArePagedAndBounded(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	var running []string
	for i := range 7 {
		id := fmt.Sprintf("p%d", i)
		if i%2 == 0 {
			if err := db.CreatePrompt(ctx, GatedPrompt(id, "c"+id, fmt.Sprintf("appr%012d", i))); err != nil {
				t.Fatal(err)
			}
			continue
		}
		running = append(running, id)
		p := &prompt.Prompt{ID: id, ConversationID: "c" + id, State: prompt.StateRunning, Rev: 1, CreatedAt: T0, UpdatedAt: T0}
		if err := db.CreatePrompt(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	var cur prompt.Cursor
	for page := 0; ; page++ {
		ids, nextCur, err := db.RunningPrompts(ctx, cur, 2)
		if err != nil {
			t.Fatal(err)
		}
		if page == 0 {
			// Created after the first page: not part of this listing.
			late := &prompt.Prompt{ID: "late", ConversationID: "clate", State: prompt.StateRunning, Rev: 1, CreatedAt: T0, UpdatedAt: T0}
			if err := db.CreatePrompt(ctx, late); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, ids...)
		if len(ids) < 2 {
			break
		}
		cur = nextCur
	}
	if !reflect.DeepEqual(got, running) {
		t.Fatalf("running = %v, want %v", got, running)
	}
}

func testHistory(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	var ids []string
	for i := range 5 {
		id := fmt.Sprintf("p%d", i)
		ids = append(ids, id)
		p := &prompt.Prompt{ID: id, ConversationID: "c", State: prompt.StateRunning, Input: "q" + id, Rev: 1,
			CreatedAt: T0, UpdatedAt: T0, Output: []prompt.Item{{Type: prompt.ItemText, Turn: 1, Text: "a" + id}}}
		if err := db.CreatePrompt(ctx, p); err != nil {
			t.Fatal(err)
		}
		done := next(p)
		done.State = prompt.StateCompleted
		if err := db.SavePrompt(ctx, done, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreatePrompt(ctx, &prompt.Prompt{ID: "other", ConversationID: "d", State: prompt.StateRunning, Rev: 1, CreatedAt: T0, UpdatedAt: T0}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		before string
		limit  int
		want   []string
	}{
		{"", 10, ids},
		{"", 2, ids[3:]},
		{"p3", 2, ids[1:3]},
		{"p0", 5, nil},
		{"p4", 0, nil},
	} {
		ps, err := db.History(ctx, "c", tc.before, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.ID)
			if len(p.Output) != 1 || p.Output[0].Text != "a"+p.ID {
				t.Errorf("history prompt %s without its items", p.ID)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("history before %q limit %d = %v, want %v", tc.before, tc.limit, got, tc.want)
		}
	}
	if _, err := db.History(ctx, "c", "other", 5); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("history before a prompt of another conversation: %v", err)
	}
}
