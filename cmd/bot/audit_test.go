package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store"
)

// auditedDatabase opens a database with n decided requests, one a minute
// from at, in chat tg:1, and leaves it open, as a running bot would.
func auditedDatabase(t *testing.T, n int, at time.Time) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tollgate.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for i := range n {
		id := fmt.Sprintf("p%d", i+1)
		aid := fmt.Sprintf("appr%012d", i+1)
		p := &prompt.Prompt{ID: id, ConversationID: "tg:1", State: prompt.StateWaiting, Input: "go", Turns: 1, Rev: 1,
			CreatedAt: at, UpdatedAt: at, Output: []prompt.Item{{Type: prompt.ItemTool, Turn: 1, Call: &prompt.Call{
				ID: "c1", Name: "shell.run", Arguments: `{"cmd":"ls"}`, Status: prompt.CallPending,
				Approval: &prompt.Approval{ID: aid, Status: prompt.ApprovalPending, Reason: "runs", RequestedAt: at,
					InputHash: prompt.InputHash(`{"cmd":"ls"}`)},
			}}}}
		if err := db.CreatePrompt(ctx, p); err != nil {
			t.Fatal(err)
		}
		d := prompt.Decision{Status: prompt.ApprovalApproved, By: "Alice (111)", At: at.Add(time.Duration(i) * time.Minute)}
		if i%2 == 1 {
			d.Status, d.Note = prompt.ApprovalRejected, "not\tthat\n\x1b[31mone"
		}
		if _, err := db.Decide(ctx, aid, d); err != nil {
			t.Fatal(err)
		}
		done := p.Clone()
		done.Rev, done.State = 3, prompt.StateCompleted
		if err := db.SavePrompt(ctx, done, nil); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// TestAuditPrintsJSONLinesWhileTheBotRuns: the database is held open by
// store.Open throughout, as the bot holds it.
func TestAuditPrintsJSONLinesWhileTheBotRuns(t *testing.T) {
	path := auditedDatabase(t, 3, time.Now().Add(-time.Hour))
	out, _, err := runBot([]string{"bot", "audit", "--json", "--limit", "2"}, map[string]string{"DATABASE_PATH": path})
	if err != nil {
		t.Fatalf("audit beside an open store: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out)
	}
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		got = append(got, m)
	}
	if got[0]["prompt_id"] != "p3" || got[1]["prompt_id"] != "p2" {
		t.Errorf("prompts %v, %v; want p3 then p2, newest first", got[0]["prompt_id"], got[1]["prompt_id"])
	}
	for _, k := range []string{"seq", "at", "conversation_id", "prompt_id", "call_id", "approval_id", "tool", "input_hash",
		"outcome", "source_kind", "source", "feedback"} {
		if _, ok := got[1][k]; !ok {
			t.Errorf("a line lacks %q: %s", k, lines[1])
		}
	}
	if got[1]["outcome"] != "rejected" || got[1]["source"] != "Alice (111)" || got[1]["feedback"] != "not\tthat\n\x1b[31mone" {
		t.Errorf("second line %v", got[1])
	}
}

// TestAuditPrintsOneSafeLineAnEntry: the text form keeps each entry on one
// line with a fixed number of fields, whatever a note holds.
func TestAuditPrintsOneSafeLineAnEntry(t *testing.T) {
	path := auditedDatabase(t, 3, time.Now().Add(-time.Hour))
	out, _, err := runBot([]string{"bot", "audit", "--since", "24h"}, map[string]string{"DATABASE_PATH": path})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out)
	}
	for _, l := range lines {
		if f := strings.Split(l, "\t"); len(f) != 9 || f[1] != "tg:1" || f[3] != "shell.run" || f[5] != "Alice (111)" {
			t.Errorf("line %q: want 9 tab-separated fields", l)
		}
		if strings.ContainsRune(l, '\x1b') {
			t.Errorf("line %q passes an escape sequence to the terminal", l)
		}
	}
	out, _, err = runBot([]string{"bot", "audit", "--since", "1m"}, map[string]string{"DATABASE_PATH": path})
	if err != nil || out != "" {
		t.Fatalf("--since 1m: %q, %v; want nothing, all is an hour old", out, err)
	}
}

func TestAuditRefusesBadFlags(t *testing.T) {
	path := auditedDatabase(t, 1, time.Now())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, "since"},
		{[]string{"--since", "-1h"}, "--since"},
		{[]string{"--limit", "0"}, "--limit"},
		{[]string{"--limit", "many"}, "limit"},
		{[]string{"--color"}, "color"},
		{[]string{"extra"}, `"extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := runBot(append([]string{"bot", "audit"}, tc.args...), map[string]string{"DATABASE_PATH": path})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one naming %s", err, tc.want)
			}
		})
	}
}
