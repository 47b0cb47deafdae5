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
	crashPoint = "BOT_CRASH_POINT" // "record" (default), "decide" or "answer"
	crashLimit = 30 * time.Second  // a child that does not die by then fails
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
	var (
		pstore prompt.Store = db
		bstore bot.Store    = killAfterRecord{db}
		model               = prompttest.NewModel(prompttest.Answer("the child never gets this far"))
		tools  []*prompt.Tool
	)
	switch os.Getenv(crashPoint) {
	case "decide":
		pstore, bstore = killAfterDecide{db}, db
		model = prompttest.NewModel(prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)))
		tools = []*prompt.Tool{crashTool(func() { log.Error("child: the tool ran before the crash") })}
	case "answer":
		pstore, bstore = killAfterAnswerSaved{db}, db
		model = prompttest.NewModel(prompttest.Answer("the answer a crash kept"))
	}
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: pstore, Tools: tools})
	if err != nil {
		log.Error("child: service", "err", err)
		return 3
	}
	b, err := bot.New(bot.Config{Token: token, APIURL: os.Getenv(crashAPI), AllowedUsers: []int64{alice.ID},
		Service: svc, Store: bstore, Logger: log, PollTimeout: 5 * time.Second})
	if err != nil {
		log.Error("child: bot", "err", err)
		return 3
	}
	err = b.Run(ctx)
	log.Error("child: Run returned without the crash", "err", err)
	return 3
}

func die() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// crashTool is the gated tool of the decision crash; ran is called when it
// runs.
func crashTool(ran func()) *prompt.Tool {
	tool, err := prompt.NewTool("shell.run", "Runs a shell command.", prompt.AlwaysFor[shellIn]("runs a command on the host"),
		func(_ context.Context, in shellIn) (string, error) { ran(); return "3 files", nil })
	if err != nil {
		panic(err)
	}
	return tool
}

// killAfterDecide dies the moment a decision has committed: before its
// edit reaches any copy, before the tool runs.
type killAfterDecide struct{ *store.DB }

func (k killAfterDecide) Decide(ctx context.Context, id string, d prompt.Decision) (prompt.ApprovalRef, error) {
	ref, err := k.DB.Decide(ctx, id, d)
	if err == nil {
		die()
	}
	return ref, err
}

// killAfterAnswerSaved dies the moment a prompt's end has committed with
// its answer in the outbox, before the sender can send it.
type killAfterAnswerSaved struct{ *store.DB }

func (k killAfterAnswerSaved) SavePrompt(ctx context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	err := k.DB.SavePrompt(ctx, p, changed, notices...)
	for _, n := range notices {
		if err == nil && n.Kind == prompt.NoticeAnswer {
			die()
		}
	}
	return err
}

// killAfterRecord is the SQLite store, but the process dies the moment a
// recording of a new update has committed.
type killAfterRecord struct{ *store.DB }

func (k killAfterRecord) RecordUpdates(ctx context.Context, ups []json.RawMessage) ([]int64, error) {
	fresh, err := k.DB.RecordUpdates(ctx, ups)
	if err == nil && len(fresh) > 0 {
		die()
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

// runCrashChild runs the crashing child at point against srv and the
// database at path; during runs while it lives (to press a button, say).
// It fails the test unless the child died of SIGKILL.
func runCrashChild(t *testing.T, srv *telegramtest.Server, path, point string, during func()) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), crashLimit+5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"=1", crashAPI+"="+srv.URL(), crashDB+"="+path, crashPoint+"="+point)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during()
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL\n%s", err, out.String())
	}
	return []byte(out.String())
}

// restartAfterCrash runs a second bot on the database at path against srv
// until stop is called.
func restartAfterCrash(t *testing.T, srv *telegramtest.Server, path string, model prompt.Model, tools []*prompt.Tool) (stop func()) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := prompt.NewService(prompt.Config{Model: model, Store: db, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{Token: token, APIURL: srv.URL(), AllowedUsers: []int64{alice.ID}, Service: svc, Store: db,
		PollTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close service: %v", err)
		}
		db.Close()
	}
}

// TestCrashRightAfterADecisionLeavesNoLiveButtons: the process dies the
// moment a press's decision commits, before any copy is edited and before
// the tool runs. The next process edits the copy, runs the tool once and
// answers once.
func TestCrashRightAfterADecisionLeavesNoLiveButtons(t *testing.T) {
	srv := telegramtest.NewServer(t, token)
	path := filepath.Join(t.TempDir(), "tollgate.db")
	srv.UserMessage(alice.ID, alice, "list")
	var msgID int
	out := runCrashChild(t, srv, path, "decide", func() {
		req := srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, hasKeyboard))
		m, err := req.Message()
		if err != nil {
			t.Fatal(err)
		}
		msgID = m.ID
		srv.Press(alice.ID, alice, m.ID, "a:"+approvalIn(t, req))
	})
	if n := len(srv.Calls(telegramtest.Method("editMessageText"))); n != 0 {
		t.Fatalf("%d edits before the crash: the test lost its premise", n)
	}
	ran := 0
	stop := restartAfterCrash(t, srv, path, prompttest.NewModel(prompttest.Answer("3 files listed")),
		[]*prompt.Tool{crashTool(func() { ran++ })})
	srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("3 files listed")))
	stop()
	edits := srv.Calls(telegramtest.Method("editMessageText", telegramtest.Succeeded))
	if len(edits) != 1 || edits[0].Int("message_id") != int64(msgID) {
		t.Errorf("%d edits, want the one copy edited once", len(edits))
	}
	mustBeClosed(t, srv, alice.ID, msgID, "Approved by Alice (111)")
	if ran != 1 {
		t.Errorf("tool ran %d times after the restart, want once", ran)
	}
	if n := len(srv.Calls(telegramtest.Method("sendMessage", textHas("3 files listed")))); n != 1 {
		t.Errorf("answer sent %d times, want once", n)
	}
	if strings.Contains(string(out), "the tool ran before the crash") {
		t.Error("the tool ran in the process that crashed")
	}
	if t.Failed() {
		fmt.Fprintf(os.Stderr, "child output:\n%s", out)
	}
}

// TestCrashRightAfterAnAnswerIsSavedDeliversItOnce: the process dies the
// moment a prompt's end commits, before its answer is sent. The next
// process sends it, once, without asking the model again.
func TestCrashRightAfterAnAnswerIsSavedDeliversItOnce(t *testing.T) {
	srv := telegramtest.NewServer(t, token)
	path := filepath.Join(t.TempDir(), "tollgate.db")
	srv.UserMessage(alice.ID, alice, "hello")
	out := runCrashChild(t, srv, path, "answer", nil)
	if n := len(srv.Calls(telegramtest.Method("sendMessage", textHas("the answer a crash kept")))); n != 0 {
		t.Fatalf("answer sent before the crash: the test lost its premise")
	}
	model := prompttest.NewModel()
	stop := restartAfterCrash(t, srv, path, model, nil)
	srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("the answer a crash kept")))
	stop()
	if n := len(srv.Calls(telegramtest.Method("sendMessage", textHas("the answer a crash kept")))); n != 1 {
		t.Errorf("answer sent %d times, want once", n)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times after the restart, want none", n)
	}
	if t.Failed() {
		fmt.Fprintf(os.Stderr, "child output:\n%s", out)
	}
}

// approvalIn returns the approval ID the Approve button of a request
// carries.
func approvalIn(t *testing.T, c telegramtest.Call) string {
	t.Helper()
	var k kb
	if err := c.Decode("reply_markup", &k); err != nil || len(k.InlineKeyboard) == 0 {
		t.Fatalf("no keyboard: %v", err)
	}
	d, _ := k.InlineKeyboard[0][0]["callback_data"].(string)
	if !strings.HasPrefix(d, "a:") {
		t.Fatalf("first button %q is not Approve", d)
	}
	return d[2:]
}
