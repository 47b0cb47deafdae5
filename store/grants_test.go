package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store"
)

// grantOn decides a fresh request, in a conversation of its own, as
// approved with g: the only way a grant gets into the store.
func grantOn(t *testing.T, db *store.DB, n int, g prompt.Grant) prompt.Grant {
	t.Helper()
	ctx := context.Background()
	aid := fmt.Sprintf("grantappr%07d", n)
	if err := db.CreatePrompt(ctx, gatedPrompt(fmt.Sprintf("pg%d", n), fmt.Sprintf("conv-g%d", n), aid)); err != nil {
		t.Fatal(err)
	}
	g.ApprovalID = aid
	if _, err := db.Decide(ctx, aid, prompt.Decision{Status: prompt.ApprovalApproved, By: g.By, At: g.CreatedAt,
		Note: prompt.GrantNote(g), Grant: &g}); err != nil {
		t.Fatalf("decide with grant %s: %v", g.ID, err)
	}
	// As the store returns it: times in UTC, the expiry in milliseconds.
	g.CreatedAt = g.CreatedAt.UTC()
	if !g.ExpiresAt.IsZero() {
		g.ExpiresAt = time.UnixMilli(g.ExpiresAt.UnixMilli()).UTC()
	}
	return g
}

func grantIDs(gs []prompt.Grant) []string {
	var ids []string
	for _, g := range gs {
		ids = append(ids, g.ID)
	}
	return ids
}

// FindGrant and Grants see the grants in force in a conversation: its
// own and those for every chat, never another chat's, an expired one
// (expires_at <= now) or a revoked one.
func TestGrantsInForceOnSQLite(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	now := t0
	mk := func(n int, id, tool, scope, conv string, expires time.Time) prompt.Grant {
		return grantOn(t, db, n, prompt.Grant{ID: id, Tool: tool, Scope: scope, Label: "label " + id,
			ConversationID: conv, By: "alice", CreatedAt: now.Add(time.Duration(n) * time.Second), ExpiresAt: expires})
	}
	gOwn := mk(1, "g-own", "shell.run", "a", "c", time.Time{})
	gAll := mk(2, "g-all", "shell.run", "b", "", time.Time{})
	gOther := mk(3, "g-other", "shell.run", "d-only", "d", time.Time{})
	gHour := mk(4, "g-hour", "shell.run", "exp", "c", now.Add(time.Hour))
	gRevoked := mk(5, "g-revoked", "shell.run", "rev", "c", time.Time{})
	gTool := mk(6, "g-tool", "web.fetch", "a", "c", time.Time{})

	revoked, err := db.RevokeGrant(ctx, gRevoked.ID, "bob", now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := gRevoked
	want.RevokedBy, want.RevokedAt = "bob", now.Add(time.Minute).UTC()
	if !reflect.DeepEqual(revoked, want) {
		t.Fatalf("revoked grant:\n%+v\nwant\n%+v", revoked, want)
	}

	hourLater := now.Add(time.Hour)
	for _, tc := range []struct {
		name              string
		conv, tool, scope string
		at                time.Time
		want              *prompt.Grant
	}{
		{"own chat", "c", "shell.run", "a", now, &gOwn},
		{"own grant from another chat", "e", "shell.run", "a", now, nil},
		{"all chats, from another chat", "e", "shell.run", "b", now, &gAll},
		{"all chats, from its chat", "c", "shell.run", "b", now, &gAll},
		{"another chat's grant", "c", "shell.run", "d-only", now, nil},
		{"that chat", "d", "shell.run", "d-only", now, &gOther},
		{"just before it lapses", "c", "shell.run", "exp", hourLater.Add(-time.Millisecond), &gHour},
		{"as it lapses", "c", "shell.run", "exp", hourLater, nil},
		{"after it lapses", "c", "shell.run", "exp", hourLater.Add(time.Minute), nil},
		{"revoked", "c", "shell.run", "rev", now, nil},
		{"same scope, other tool", "c", "web.fetch", "a", now, &gTool},
		{"other tool, unknown scope", "c", "web.fetch", "b", now, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := db.FindGrant(ctx, tc.conv, tc.tool, tc.scope, tc.at)
			if tc.want == nil {
				if !errors.Is(err, prompt.ErrNotFound) {
					t.Fatalf("FindGrant = %+v, %v; want ErrNotFound", g, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(g, *tc.want) {
				t.Fatalf("FindGrant = %+v, %v\nwant %+v", g, err, *tc.want)
			}
		})
	}

	gs, err := db.Grants(ctx, "c", now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := grantIDs(gs), []string{"g-tool", "g-hour", "g-all", "g-own"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("grants of c, newest first: %v, want %v", got, want)
	}
	if !reflect.DeepEqual(gs[1], gHour) {
		t.Fatalf("listed grant:\n%+v\nwant\n%+v", gs[1], gHour)
	}
	gs, _ = db.Grants(ctx, "c", hourLater)
	if got, want := grantIDs(gs), []string{"g-tool", "g-all", "g-own"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("grants of c an hour later: %v, want %v", got, want)
	}
	gs, _ = db.Grants(ctx, "nobody", now)
	if got, want := grantIDs(gs), []string{"g-all"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("grants of a chat without its own: %v, want %v", got, want)
	}

	// The newest of two covering grants is the one found.
	gNewer := mk(7, "g-newer", "shell.run", "a", "", time.Time{})
	if g, err := db.FindGrant(ctx, "c", "shell.run", "a", now); err != nil || g.ID != gNewer.ID {
		t.Fatalf("FindGrant with two covering: %+v, %v; want the newer", g, err)
	}
}

func TestRevokeGrantErrorsOnSQLite(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	g := grantOn(t, db, 1, prompt.Grant{ID: "g1", Tool: "shell.run", Scope: "s", Label: "l", ConversationID: "c",
		By: "alice", CreatedAt: t0})
	if _, err := db.RevokeGrant(ctx, "nope", "bob", t0); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("revoke an unknown grant: %v", err)
	}
	if _, err := db.RevokeGrant(ctx, g.ID, "bob", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	again, err := db.RevokeGrant(ctx, g.ID, "carol", t0.Add(time.Hour))
	if !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("revoke twice: %v, want ErrNotPending", err)
	}
	if again.RevokedBy != "bob" || !again.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("a second revoke changed the grant: %+v", again)
	}
}

// A grant is part of its decision: a Decide that loses the
// compare-and-set records none.
func TestADecisionThatLosesRecordsNoGrant(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	const aid = "appr0000000000001"
	if err := db.CreatePrompt(ctx, gatedPrompt("p1", "c", aid)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Decide(ctx, aid, prompt.Decision{Status: prompt.ApprovalRejected, By: "bob", At: t0}); err != nil {
		t.Fatal(err)
	}
	g := prompt.Grant{ID: "g-late", Tool: "shell.run", Scope: "s", Label: "l", By: "alice", CreatedAt: t0, ApprovalID: aid}
	ref, err := db.Decide(ctx, aid, prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: t0, Grant: &g})
	if !errors.Is(err, prompt.ErrNotPending) || ref.Status != prompt.ApprovalRejected {
		t.Fatalf("late approve always: %+v, %v; want ErrNotPending", ref, err)
	}
	if gs, err := db.Grants(ctx, "c", t0); err != nil || len(gs) != 0 {
		t.Fatalf("grants after a lost decision: %+v, %v", gs, err)
	}
	if _, err := db.RevokeGrant(ctx, "g-late", "bob", t0); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("the lost grant exists: %v", err)
	}
	if _, err := db.Decide(ctx, "nope", prompt.Decision{Status: prompt.ApprovalApproved, By: "alice", At: t0, Grant: &g}); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("approve always an unknown approval: %v", err)
	}
	if gs, _ := db.Grants(ctx, "c", t0); len(gs) != 0 {
		t.Fatalf("grants after deciding an unknown approval: %+v", gs)
	}
}

// A 'granted' notice names its call, through the outbox and back.
func TestGrantedNoticesRoundTripWithTheirCall(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	p := gatedPrompt("p1", "c", "appr0000000000001")
	if err := db.CreatePrompt(ctx, p); err != nil {
		t.Fatal(err)
	}
	n := prompt.Notice{Kind: prompt.NoticeGranted, ConversationID: "c", PromptID: "p1", CallID: "c2"}
	if err := db.SavePrompt(ctx, next(p), nil, n); err != nil {
		t.Fatal(err)
	}
	due, err := db.DueNotices(ctx, t0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].Notice != n || due[0].Resend || due[0].Attempts != 0 {
		t.Fatalf("due = %+v, want the granted notice of c2", due)
	}
	if err := db.MarkNotice(ctx, due[0].Seq, ""); err != nil {
		t.Fatal(err)
	}
	if due, _ = db.DueNotices(ctx, t0, 10); len(due) != 0 {
		t.Fatalf("due after delivery: %+v", due)
	}
}
