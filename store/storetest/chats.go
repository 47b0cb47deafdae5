package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"tollgate/prompt"
)

func testChats(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if _, err := db.ChatOf(ctx, "conv"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("unknown conversation: %v", err)
	}
	for range 2 { // idempotent
		if err := db.SaveChat(ctx, "conv", -1001234); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := db.ChatOf(ctx, "conv"); err != nil || id != -1001234 {
		t.Fatalf("chat = %d, %v", id, err)
	}
	// A group migrated to a supergroup gets a new chat ID.
	if err := db.SaveChat(ctx, "conv", -1009999); err != nil {
		t.Fatal(err)
	}
	if id, err := db.ChatOf(ctx, "conv"); err != nil || id != -1009999 {
		t.Fatalf("chat after move = %d, %v", id, err)
	}
	if err := db.SaveChat(ctx, "", 1); err == nil {
		t.Error("empty conversation ID saved")
	}
}

func testApprovalMessages(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	for _, id := range []string{"appr0000000000001", "appr0000000000002"} {
		p := GatedPrompt("p"+id, "conv"+id, id)
		if err := db.CreatePrompt(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	const a1, a2 = "appr0000000000001", "appr0000000000002"
	if _, err := db.ApprovalMessages(ctx, a1); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("no messages yet: %v", err)
	}
	// Re-sent after restarts: newer messages, some recorded twice.
	for _, m := range []int{30, 10, 30, 20} {
		if err := db.AddApprovalMessage(ctx, a1, 77, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddApprovalMessage(ctx, a2, 77, 40); err != nil {
		t.Fatal(err)
	}
	copies, err := db.ApprovalMessages(ctx, a1)
	want := []prompt.ApprovalCopy{{ChatID: 77, MessageID: 30}, {ChatID: 77, MessageID: 10}, {ChatID: 77, MessageID: 20}}
	if err != nil || !reflect.DeepEqual(copies, want) {
		t.Fatalf("messages = %v %v; want %v (oldest first)", copies, err, want)
	}
	for m, want := range map[int]string{30: a1, 10: a1, 40: a2} {
		if got, err := db.ApprovalByMessage(ctx, 77, m); err != nil || got != want {
			t.Errorf("message %d shows %q, %v; want %s", m, got, err, want)
		}
	}
	if _, err := db.ApprovalByMessage(ctx, 78, 30); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("message of another chat: %v", err)
	}
	if err := db.AddApprovalMessage(ctx, "missing", 77, 50); !errors.Is(err, prompt.ErrNotFound) {
		t.Errorf("unknown approval: %v", err)
	}
	err = db.AddApprovalMessage(ctx, a2, 77, 30)
	if err == nil || !strings.Contains(err.Error(), a1) {
		t.Errorf("message already showing another approval: %v", err)
	}
	if got, _ := db.ApprovalByMessage(ctx, 77, 30); got != a1 {
		t.Errorf("message 30 now shows %s", got)
	}
}

// testApprovalMessagesInSeveralChats: a group's request sent to each
// approver privately has copies in several chats; all are returned, in the
// order they were recorded, and each chat's message IDs stay its own.
func testApprovalMessagesInSeveralChats(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	const a1, a2 = "appr0000000000001", "appr0000000000002"
	for _, id := range []string{a1, a2} {
		if err := db.CreatePrompt(ctx, GatedPrompt("p"+id, "conv"+id, id)); err != nil {
			t.Fatal(err)
		}
	}
	// The group's copy, then one in each approver's private chat; message 5
	// exists in both private chats, as per-chat IDs allow.
	for _, c := range []prompt.ApprovalCopy{{ChatID: -100500, MessageID: 9}, {ChatID: 111, MessageID: 5}, {ChatID: 222, MessageID: 5}, {ChatID: 111, MessageID: 5}} {
		if err := db.AddApprovalMessage(ctx, a1, c.ChatID, c.MessageID); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddApprovalMessage(ctx, a2, 111, 6); err != nil {
		t.Fatal(err)
	}
	copies, err := db.ApprovalMessages(ctx, a1)
	want := []prompt.ApprovalCopy{{ChatID: -100500, MessageID: 9}, {ChatID: 111, MessageID: 5}, {ChatID: 222, MessageID: 5}}
	if err != nil || !reflect.DeepEqual(copies, want) {
		t.Fatalf("copies = %v, %v; want %v", copies, err, want)
	}
	for _, c := range want {
		if got, err := db.ApprovalByMessage(ctx, c.ChatID, c.MessageID); err != nil || got != a1 {
			t.Errorf("message %d of chat %d shows %q, %v; want %s", c.MessageID, c.ChatID, got, err, a1)
		}
	}
	if err := db.AddApprovalMessage(ctx, a2, 222, 5); err == nil {
		t.Error("a private chat's copy of one approval was recorded for another")
	}
}

func testDomains(t *testing.T, open Opener) {
	ctx := context.Background()
	db := open(t, nil)
	if ds, err := db.Domains(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("empty list: %v, %v", ds, err)
	}
	for _, d := range []string{"golang.org", "example.com", "xn--bcher-kva.example"} {
		if added, err := db.AddDomain(ctx, d, "alice"); err != nil || !added {
			t.Fatalf("add %s: %v, %v", d, added, err)
		}
	}
	if added, err := db.AddDomain(ctx, "golang.org", "bob"); err != nil || added {
		t.Fatalf("add again: %v, %v", added, err)
	}
	ds, err := db.Domains(ctx)
	if err != nil || !slices.Equal(ds, []string{"example.com", "golang.org", "xn--bcher-kva.example"}) {
		t.Fatalf("domains = %v, %v", ds, err)
	}
	if by, err := db.Entries(ctx); err != nil || len(by) != 3 || by["golang.org"] != "alice" {
		t.Fatalf("entries = %v, %v", by, err)
	}
	if removed, err := db.RemoveDomain(ctx, "golang.org"); err != nil || !removed {
		t.Fatalf("remove: %v, %v", removed, err)
	}
	if removed, err := db.RemoveDomain(ctx, "golang.org"); err != nil || removed {
		t.Fatalf("remove again: %v, %v", removed, err)
	}
	if _, err := db.AddDomain(ctx, "", "alice"); err == nil {
		t.Error("empty domain added")
	}
}
