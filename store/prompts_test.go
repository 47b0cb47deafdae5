package store_test

import (
	"context"
	"encoding/json"
	"strings"
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

// The approval lives in one row: the item's JSON carries none of it, and
// a step's save cannot decide it.
func TestApprovalsAreKeptInOnePlace(t *testing.T) {
	ctx := context.Background()
	db, path := openTemp(t)
	p := gatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	q := next(p)
	a := q.Output[1].Call.Approval
	a.Status, a.DecidedBy, a.Note = prompt.ApprovalApproved, "mallory", "forged"
	if err := db.SavePrompt(ctx, q, []int{1}); err != nil {
		t.Fatal(err)
	}
	ref, err := db.FindApproval(ctx, a.ID)
	if err != nil || ref.Status != prompt.ApprovalPending || ref.DecidedBy != "" {
		t.Fatalf("a save decided the approval: %+v, %v", ref, err)
	}
	if ref.Note != "forged" {
		t.Fatalf("note = %q: a step may set the note", ref.Note)
	}
	db.Close()
	raw := rawDB(t, path)
	rows, err := raw.Query(`SELECT body FROM prompt_items WHERE prompt_id = 'p1'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(body, "approval") || strings.Contains(body, a.ID) {
			t.Fatalf("item JSON carries the approval: %s", body)
		}
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClosedStoreGivesClearErrors(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	db.Close()
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", "appr0000000000001")); err == nil || !strings.Contains(err.Error(), "p1") {
		t.Fatalf("create on a closed store: %v", err)
	}
	if _, err := db.LoadPrompt(ctx, "p1"); err == nil {
		t.Fatal("load on a closed store worked")
	}
}
