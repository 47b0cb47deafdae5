package bot_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/store"
)

// BenchmarkPressToAnswer measures, through the fake Bot API on loopback
// with the real client, a scripted model and SQLite on disk, the time from
// a press on Approve to the final answer in a chat that has been quiet:
// the decision, the edit of the request, the tool, the model's last turn
// and the answer, each saved and paced as in production.
func BenchmarkPressToAnswer(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "tollgate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tool, err := prompt.NewTool("shell.run", "Runs a shell command.", prompt.AlwaysFor[shellIn]("runs a command on the host"),
		func(context.Context, shellIn) (string, error) { return "3 files", nil })
	if err != nil {
		b.Fatal(err)
	}
	model := prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
		if last := req.Messages[len(req.Messages)-1]; last.Role == prompt.RoleUser {
			return prompt.Response{ToolCalls: []prompt.ToolCall{{ID: "c1", Name: "shell.run", Arguments: `{"cmd":"ls"}`}}}, nil
		}
		return prompt.Response{Text: "There are 3 files."}, nil
	})
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: db, Tools: []*prompt.Tool{tool}, HistoryLimit: 1})
	if err != nil {
		b.Fatal(err)
	}
	srv := telegramtest.NewServer(b, token)
	users := make([]int64, 0, 1<<16)
	for i := range cap(users) {
		users = append(users, int64(10_000+i))
	}
	tg, err := bot.New(bot.Config{Token: token, APIURL: srv.URL(), AllowedUsers: users, Service: svc, Store: db,
		PollTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tg.Run(ctx) }()
	defer func() {
		cancel()
		svc.Close(context.Background())
		<-done
	}()
	const wait = 10 * time.Second
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		// People are slower than this loop: without a pause it would send
		// over 30 messages a second and measure the global limit instead.
		// 150 ms refills more than the 3 messages an iteration sends.
		time.Sleep(150 * time.Millisecond)
		// A chat of its own: quiet for as long as the benchmark has run.
		user := models.User{ID: users[i%len(users)], FirstName: fmt.Sprint("User", i)}
		srv.UserMessage(user.ID, user, "list the files")
		req := srv.WaitCall(b, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard, toChat(user.ID)))
		m, err := req.Message()
		if err != nil {
			b.Fatal(err)
		}
		// The press must find the copy recorded, as a human's would.
		for {
			if _, err := db.ApprovalByMessage(ctx, user.ID, m.ID); err == nil {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		id := approvalOf(b, req)
		b.StartTimer()
		srv.Press(user.ID, user, m.ID, "a:"+id)
		srv.WaitCall(b, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(user.ID), textHas("There are 3 files.")))
	}
}

// approvalOf returns the approval ID a request's Approve button carries.
func approvalOf(b *testing.B, c telegramtest.Call) string {
	var k kb
	if err := c.Decode("reply_markup", &k); err != nil || len(k.InlineKeyboard) == 0 {
		b.Fatalf("no keyboard: %v", err)
	}
	i := slices.IndexFunc(k.InlineKeyboard[0], func(btn map[string]any) bool {
		d, _ := btn["callback_data"].(string)
		return len(d) > 2 && d[:2] == "a:"
	})
	if i < 0 {
		b.Fatal("no Approve button")
	}
	return k.InlineKeyboard[0][i]["callback_data"].(string)[2:]
}
