package prompttest_test

import (
	"context"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// TestAuditIsWrittenWhereTheSQLiteStoreWritesIt: once per decision, as
// store/audit_test.go proves of the SQLite store: a timeout then the end
// of its prompt is one entry, a ruled call saved twice is one, a cancel
// is one, newest first.
func TestAuditIsWrittenWhereTheSQLiteStoreWritesIt(t *testing.T) {
	ctx := context.Background()
	m := prompttest.NewStore()
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	p := waiting("p1", "c", "a1")
	p.Output = append(p.Output, prompt.Item{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{ID: "c2", Name: "t", Arguments: "{}",
		Status: prompt.CallQueued}})
	if err := m.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Decide(ctx, "a1", prompt.Decision{Status: prompt.ApprovalExpired, At: at, Note: "no decision within 30m"}); err != nil {
		t.Fatal(err)
	}
	q, _ := m.LoadPrompt(ctx, "p1")
	q.Rev++
	q.Output[1].Call.Status = prompt.CallExecuting
	q.Output[1].Call.Ruling = &prompt.Ruling{Allowed: true, Kind: "grant", By: "grant g1 of Alice (1)", At: at}
	for range 2 {
		if err := m.SavePrompt(ctx, q, []int{0, 1}); err != nil {
			t.Fatal(err)
		}
		q.Rev++
	}
	if err := m.CreatePrompt(ctx, waiting("p2", "d", "a2")); err != nil {
		t.Fatal(err)
	}
	if err := m.CancelPrompt(ctx, "p2", "Bob (2)", at); err != nil {
		t.Fatal(err)
	}
	es, err := m.Audit(ctx, prompt.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, string(e.Outcome)+"/"+string(e.SourceKind)+"/"+e.Source)
	}
	want := []string{"cancelled/person/Bob (2)", "allowed/grant/grant g1 of Alice (1)", "expired/timeout/no decision within 30m"}
	if len(got) != len(want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	if !es[0].At.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("at %v, want it to the millisecond as SQLite keeps it", es[0].At)
	}
	if es, _ := m.Audit(ctx, prompt.AuditQuery{ConversationID: "c", Limit: 1}); len(es) != 1 || es[0].SourceKind != prompt.SourceGrant {
		t.Errorf("chat c, limit 1: %+v", es)
	}
}
