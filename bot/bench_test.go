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
	"tollgate/prompt/prompttest"
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

// BenchmarkResendAfterRestart measures a start that finds 1,000 messages
// owed to 200 chats (in each: four answers a crash kept from it and one
// request left waiting, re-sent), against a fake Bot API that refuses with
// 429 beyond about 30 messages a second overall and one a second per
// chat. Every message must arrive once, none refused more than once, and
// the whole within 20% of what the limits allow (1,000 / 30 a second).
func BenchmarkResendAfterRestart(b *testing.B) {
	const chats, answers = 200, 4
	for range b.N {
		b.StopTimer()
		ctx, cancel := context.WithCancel(context.Background())
		pstore := prompttest.NewStore()
		srv := telegramtest.NewServer(b, token)
		srv.EnforceRates(telegramtest.Rates{})
		var users []int64
		t0 := time.Now().Add(-time.Hour)
		for c := range chats {
			user := models.User{ID: int64(20_000 + c), FirstName: fmt.Sprint("User", c)}
			users = append(users, user.ID)
			srv.KnownChat(user.ID, user)
			conv := fmt.Sprintf("tg:%d", user.ID)
			for a := range answers {
				p := &prompt.Prompt{ID: fmt.Sprintf("p_%d_%d", c, a), ConversationID: conv, State: prompt.StateRunning,
					Input: "q", Rev: 1, CreatedAt: t0, UpdatedAt: t0}
				if err := pstore.CreatePrompt(ctx, p); err != nil {
					b.Fatal(err)
				}
				done := p.Clone()
				done.Rev, done.State = 2, prompt.StateCompleted
				done.Output = []prompt.Item{{Type: prompt.ItemText, Turn: 1, Text: fmt.Sprintf("answer %d to chat %d", a, c)}}
				if err := pstore.SavePrompt(ctx, done, []int{0}, prompt.Notice{Kind: prompt.NoticeAnswer, ConversationID: conv, PromptID: p.ID}); err != nil {
					b.Fatal(err)
				}
			}
			if err := pstore.CreatePrompt(ctx, waitingPrompt(c, conv, t0)); err != nil {
				b.Fatal(err)
			}
		}
		svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: pstore})
		if err != nil {
			b.Fatal(err)
		}
		tg, err := bot.New(bot.Config{Token: token, APIURL: srv.URL(), AllowedUsers: users, Service: svc,
			Store: newMemStore(pstore, newCallLog()), PollTimeout: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		ran := make(chan error, 1)
		go func() { ran <- tg.Run(ctx) }()
		sent := srv.WaitCalls(b, 2*time.Minute, chats*(answers+1), telegramtest.Method("sendMessage", telegramtest.Succeeded))
		took := time.Since(start)
		b.StopTimer()
		cancel()
		svc.Close(context.Background())
		<-ran

		seen := map[string]bool{}
		for _, c := range sent {
			key := fmt.Sprint(c.Int("chat_id"), c.Param("text"))
			if seen[key] {
				b.Fatalf("sent twice to chat %d: %q", c.Int("chat_id"), c.Param("text"))
			}
			seen[key] = true
		}
		refused := map[string]int{}
		for _, c := range srv.Calls(telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return c.Status == 429 })) {
			key := fmt.Sprint(c.Int("chat_id"), c.Param("text"))
			if refused[key]++; refused[key] > 1 {
				b.Fatalf("refused %d times: chat %d %q", refused[key], c.Int("chat_id"), c.Param("text"))
			}
		}
		allowed := time.Duration(chats*(answers+1)) * time.Second / 30
		b.ReportMetric(took.Seconds(), "s/restart")
		b.ReportMetric(took.Seconds()/allowed.Seconds(), "x-limit")
		b.ReportMetric(float64(len(refused)), "refused-429")
		if took > allowed*12/10 {
			b.Errorf("took %v, more than 20%% over the %v the limits allow", took, allowed)
		}
	}
}
