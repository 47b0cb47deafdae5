package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"
	"golang.org/x/time/rate"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestEditNotModifiedIsSuccess(t *testing.T) {
	srv := telegramtest.NewServer(t, "1:t")
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Token: "1:t", APIURL: srv.URL(), Service: svc, Store: nopStore{}, Limits: Limits{ChatRate: rate.Inf}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv.UserMessage(5, models.User{ID: 5, FirstName: "U"}, "hi")
	id, err := b.send(ctx, message{chat: 5, html: "<b>request</b>"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.edit(ctx, 5, id, "request <i>approved</i>"); err != nil {
			t.Fatalf("edit: %v", err)
		}
	}
	calls := srv.Calls(telegramtest.Method("editMessageText"))
	if len(calls) != 2 || !calls[0].OK() || !strings.Contains(calls[1].Description, "not modified") {
		t.Errorf("edits: %+v", calls)
	}
	if err := b.edit(ctx, 5, 99, "x"); err == nil {
		t.Error("editing a missing message succeeded")
	}
}

type nopStore struct{}

func (nopStore) SaveChat(context.Context, string, int64) error            { return nil }
func (nopStore) AddEditMessage(context.Context, string, int64, int) error { return nil }
func (nopStore) EditByMessage(context.Context, int64, int) (string, error) {
	return "", prompt.ErrNotFound
}
func (nopStore) ChatOf(context.Context, string) (int64, error) { return 0, prompt.ErrNotFound }
func (nopStore) AddApprovalMessage(context.Context, string, int64, int) error {
	return nil
}
func (nopStore) ApprovalMessages(context.Context, string) ([]prompt.ApprovalCopy, error) {
	return nil, prompt.ErrNotFound
}
func (nopStore) ApprovalByMessage(context.Context, int64, int) (string, error) {
	return "", prompt.ErrNotFound
}
func (nopStore) DueNotices(context.Context, time.Time, int) ([]prompt.OutboxEntry, error) {
	return nil, nil
}
func (nopStore) NextNoticeAt(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}
func (nopStore) MarkNotice(context.Context, int64, string) error            { return nil }
func (nopStore) HoldNotice(context.Context, int64, time.Time, string) error { return nil }
func (nopStore) ClaimNotice(context.Context, int64, string, time.Time, time.Duration) (bool, error) {
	return true, nil
}
