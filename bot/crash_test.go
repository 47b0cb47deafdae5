package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tollgate/bot"
	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
	"tollgate/store"
)

// The test binary runs as a crashing bot when crashEnv is set; see
// TestMain and TestCrashRightAfterRecordingLosesNoUpdate.
const (
	crashEnv   = "BOT_CRASH_CHILD"
	crashAPI   = "BOT_CRASH_API_URL"
	crashDB    = "BOT_CRASH_DB"
	crashLimit = 30 * time.Second // a child that does not die by then fails
)

func TestMain(m *testing.M) {
	if os.Getenv(crashEnv) != "" {
		os.Exit(crashChild())
	}
	os.Exit(m.Run())
}

// crashChild runs a bot on the SQLite store at $BOT_CRASH_DB against the
// fake Bot API at $BOT_CRASH_API_URL, and SIGKILLs itself as soon as an
// update is recorded: before the next getUpdates confirms it, before any
// handler runs. It returns only on failure.
func crashChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), crashLimit)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	db, err := store.Open(ctx, os.Getenv(crashDB))
	if err != nil {
		log.Error("child: open store", "err", err)
		return 3
	}
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(prompttest.Answer("the child never gets this far")), Store: db})
	if err != nil {
		log.Error("child: service", "err", err)
		return 3
	}
	b, err := bot.New(bot.Config{Token: token, APIURL: os.Getenv(crashAPI), AllowedUsers: []int64{alice.ID},
		Service: svc, Store: killAfterRecord{db}, Logger: log, PollTimeout: 5 * time.Second})
	if err != nil {
		log.Error("child: bot", "err", err)
		return 3
	}
	err = b.Run(ctx)
	log.Error("child: Run returned without the crash", "err", err)
	return 3
}

// killAfterRecord is the SQLite store, but the process dies the moment a
// recording of a new update has committed.
type killAfterRecord struct{ *store.DB }

func (k killAfterRecord) RecordUpdates(ctx context.Context, ups []json.RawMessage) ([]int64, error) {
	fresh, err := k.DB.RecordUpdates(ctx, ups)
	if err == nil && len(fresh) > 0 {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return fresh, err
}

func TestCrashRightAfterRecordingLosesNoUpdate(t *testing.T) {
	srv := telegramtest.NewServer(t, token)
	path := filepath.Join(t.TempDir(), "tollgate.db")
	srv.UserMessage(alice.ID, alice, "hello after a crash")
	id := srv.Queued()[0].ID

	ctx, cancel := context.WithTimeout(context.Background(), crashLimit+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"=1", crashAPI+"="+srv.URL(), crashDB+"="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL\n%s", err, out)
	}
	// Telegram was never told: it still holds the update.
	if q := srv.Queued(); len(q) != 1 || q[0].ID != id {
		t.Fatalf("after the crash Telegram holds %+v, want update %d", q, id)
	}

	// The next process, on the same database and the same Telegram.
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	left, err := db.UnhandledUpdates(ctx, 0, 10)
	if err != nil || len(left) != 1 {
		t.Fatalf("after the crash: %d unhandled updates, %v; want the one recorded", len(left), err)
	}
	model := prompttest.NewModel(prompttest.Answer("answer after the crash"))
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	b, err := bot.New(bot.Config{Token: token, APIURL: srv.URL(), AllowedUsers: []int64{alice.ID}, Service: svc, Store: db,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), PollTimeout: 5 * time.Second,
		Limits: bot.Limits{ChatRate: 1000, GroupRate: 1000, GlobalRate: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("answer after the crash")))
	// Telegram delivered it again; it was recognised and confirmed.
	srv.WaitCall(t, wait, telegramtest.Method("getUpdates", returns(id)))
	if !srv.AwaitConfirmed(wait, id) {
		t.Fatal("update never confirmed")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := svc.Close(ctx); err != nil {
		t.Errorf("close service: %v", err)
	}

	if n := len(srv.Calls(telegramtest.Method("sendMessage", textHas("answer after the crash")))); n != 1 {
		t.Errorf("answer sent %d times, want once", n)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("model asked %d times, want once", n)
	}
	ps, err := db.History(ctx, "tg:111", "", 10)
	if err != nil || len(ps) != 1 || ps[0].Input != "hello after a crash" {
		t.Errorf("prompts of the chat: %d, %v; want the one message", len(ps), err)
	}
	if left, err := db.UnhandledUpdates(ctx, 0, 10); err != nil || len(left) != 0 {
		t.Errorf("still unhandled: %d, %v", len(left), err)
	}
	if !strings.Contains(logs.String(), "update delivered again") {
		t.Errorf("the redelivery was not recognised:\n%s", logs.String())
	}
	if t.Failed() {
		fmt.Fprintf(os.Stderr, "child output:\n%s", out)
	}
}
