package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store"
)

// helperEnv makes the test binary act as a helper process; see TestMain.
const helperEnv = "STORE_HELPER"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(helperEnv); mode {
	case "":
		os.Exit(m.Run())
	case "open":
		os.Exit(helperOpen())
	case "crash":
		os.Exit(crashChild())
	case "sqlite":
		os.Exit(helperSQLite())
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		os.Exit(2)
	}
}

// crashService is the service both the crashing child and the recovering
// parent run: every prompt calls the gated tool danger.run rounds times,
// one call per model turn, then answers. The tool appends
// "promptID/callID" to logPath, then calls afterAppend if set.
func crashService(st prompt.Store, logPath string, rounds int, afterAppend func()) (*prompt.Service, error) {
	type input struct {
		N int `json:"n"`
	}
	tool, err := prompt.NewTool("danger.run", "does something that cannot be undone",
		prompt.AlwaysFor[input]("cannot be undone"),
		func(ctx context.Context, in input) (string, error) {
			ci, _ := prompt.CallFromContext(ctx)
			f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return "", err
			}
			_, err = fmt.Fprintf(f, "%s/%s\n", ci.PromptID, ci.CallID)
			f.Close()
			if err != nil {
				return "", err
			}
			if afterAppend != nil {
				afterAppend()
			}
			return "done " + strconv.Itoa(in.N), nil
		})
	if err != nil {
		return nil, err
	}
	model := prompt.ModelFunc(func(ctx context.Context, req prompt.Request) (prompt.Response, error) {
		results := 0
		for _, m := range slices.Backward(req.Messages) {
			if m.Role == prompt.RoleUser {
				break
			}
			if m.Role == prompt.RoleTool {
				results++
			}
		}
		if results < rounds {
			return prompt.Response{ToolCalls: []prompt.ToolCall{{
				ID: fmt.Sprintf("call%d", results+1), Name: "danger.run", Arguments: fmt.Sprintf(`{"n":%d}`, results+1),
			}}}, nil
		}
		return prompt.Response{Text: "all done"}, nil
	})
	// One process at a time opens a SQLite file: it takes no leases.
	return prompt.NewService(prompt.Config{Model: model, Store: st, Tools: []*prompt.Tool{tool}})
}

// killAfterDecide dies the moment a decision is durable, before the
// runner can settle it or save the call as executing.
type killAfterDecide struct {
	*store.DB
	kill func()
}

func (k killAfterDecide) Decide(ctx context.Context, id string, d prompt.Decision) (prompt.ApprovalRef, error) {
	ref, err := k.DB.Decide(ctx, id, d)
	if err == nil {
		k.kill()
	}
	return ref, err
}

// killAfterSave dies the moment a step that leaves a call in status
// is durable: at the boundary after that step.
type killAfterSave struct {
	*store.DB
	status prompt.CallStatus
	kill   func()
}

func (k killAfterSave) SavePrompt(ctx context.Context, p *prompt.Prompt, changed []int, notices ...prompt.Notice) error {
	err := k.DB.SavePrompt(ctx, p, changed, notices...)
	if err == nil {
		for _, i := range changed {
			if c := p.Output[i].Call; c != nil && c.Status == k.status {
				k.kill()
			}
		}
	}
	return err
}

// crashChild is the helper process that crashes at STORE_CRASH_POINT. It
// reports on stdout, one write per line, what is durable: "pending
// <approvalID>" after a pause was saved, "approved <approvalID>" after a
// decision was saved.
func crashChild() int {
	ctx := context.Background()
	point := os.Getenv("STORE_CRASH_POINT")
	n, _ := strconv.Atoi(os.Getenv("STORE_CRASH_N"))
	rounds, _ := strconv.Atoi(os.Getenv("STORE_CRASH_ROUNDS"))
	say := func(format string, args ...any) { os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n") }
	kill := func() {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	db, err := store.Open(ctx, os.Getenv("STORE_HELPER_DB"))
	if err != nil {
		say("error %v", err)
		return 1
	}
	var st prompt.Store = db
	var afterAppend func()
	switch point {
	case "approved":
		st = killAfterDecide{DB: db, kill: kill}
	case "settled":
		st = killAfterSave{DB: db, status: prompt.CallApproved, kill: kill}
	case "executing":
		st = killAfterSave{DB: db, status: prompt.CallExecuting, kill: kill}
	case "result":
		st = killAfterSave{DB: db, status: prompt.CallDone, kill: kill}
	case "queued":
		st = killAfterSave{DB: db, status: prompt.CallQueued, kill: kill}
	case "invoke":
		afterAppend = kill
	}
	svc, err := crashService(st, os.Getenv("STORE_HELPER_TOOLLOG"), rounds, afterAppend)
	if err != nil {
		say("error %v", err)
		return 1
	}
	reqs := make(chan prompt.ApprovalRequest, 10*n)
	svc.OnApprovalRequested(func(ctx context.Context, req prompt.ApprovalRequest) {
		say("pending %s", req.ApprovalID)
		reqs <- req
	})
	for i := range n {
		if _, err := svc.Create(ctx, fmt.Sprint("conv", i), "please do it"); err != nil {
			say("error %v", err)
			return 1
		}
	}
	timeout := time.After(time.Minute)
	switch point {
	case "pause":
		for range n {
			<-reqs
		}
		kill()
	case "queued":
		// Killed by the first model turn's save.
	case "approved", "invoke", "settled", "executing", "result":
		req := <-reqs
		for range n - 1 {
			<-reqs
		}
		if err := svc.Approve(ctx, req.ApprovalID, "alice"); err != nil {
			say("error %v", err)
			return 1
		}
	case "burst":
		for {
			select {
			case req := <-reqs:
				if err := svc.Approve(ctx, req.ApprovalID, "alice"); err != nil {
					say("error %v", err)
					return 1
				}
				say("approved %s", req.ApprovalID)
			case <-timeout:
				return 3
			}
		}
	}
	<-timeout
	return 3 // never killed: the parent reports it
}

type crashRun struct {
	pending, approved []string
}

// runCrashChild runs the child until it is killed: by itself, or by this
// process once killAfterApproved approvals were reported (0: never).
func runCrashChild(t *testing.T, dbPath, logPath, point string, n, rounds, killAfterApproved int) crashRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=crash", "STORE_HELPER_DB="+dbPath, "STORE_HELPER_TOOLLOG="+logPath,
		"STORE_CRASH_POINT="+point, "STORE_CRASH_N="+strconv.Itoa(n), "STORE_CRASH_ROUNDS="+strconv.Itoa(rounds))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var run crashRun
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		kind, arg, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "pending":
			run.pending = append(run.pending, arg)
		case "approved":
			run.approved = append(run.approved, arg)
			if len(run.approved) == killAfterApproved {
				cmd.Process.Kill()
			}
		default:
			t.Errorf("child: %s", sc.Text())
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed by SIGKILL at %s: %v", point, err)
	}
	return run
}

type recovery struct {
	db        *store.DB
	reemitted []string
	prompts   []*prompt.Prompt // every prompt, when all ended
	toolRuns  map[string]int   // "promptID/callID" -> invocations
	logBefore map[string]int   // tool runs before recovery
}

// recoverAndFinish opens the crashed database in this process, recovers,
// approves every request until every recovered prompt has completed, and
// returns what happened.
func recoverAndFinish(t *testing.T, dbPath, logPath string, conversations, rounds int) recovery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := recovery{logBefore: countLines(t, logPath)}
	db, err := store.Open(ctx, dbPath)
	if err != nil {
		t.Fatalf("open after crash: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	rec.db = db
	integrityOK(t, rawDB(t, dbPath))

	svc, err := crashService(db, logPath, rounds, nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make(chan prompt.ApprovalRequest, 100*conversations)
	ended := make(chan prompt.Answer, conversations)
	svc.OnApprovalRequested(func(ctx context.Context, req prompt.ApprovalRequest) { reqs <- req })
	svc.OnEnded(func(ctx context.Context, a prompt.Answer) { ended <- a })
	// No sender runs here: the test reads what the outbox would show, the
	// requests still pending (undelivered ones from before the crash, and
	// the re-sends Recover adds), and approves each.
	waiting := func(extra string) []string {
		rows, err := rawDB(t, dbPath).QueryContext(ctx, `SELECT DISTINCT o.approval_id FROM outbox o
			JOIN approvals a ON a.id = o.approval_id
			WHERE o.kind = 'request' AND o.done_at IS NULL AND a.status = 'pending' `+extra)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	rec.reemitted = waiting("")
	recovered, err := svc.Recover(ctx)
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	resent := waiting("AND o.resend = 1")
	if len(resent) != recovered.Resent {
		t.Fatalf("outbox holds %d re-sends, Recover said %d", len(resent), recovered.Resent)
	}
	rec.reemitted = append(rec.reemitted, resent...)
	n := recovered.Resumed
	for _, id := range rec.reemitted {
		reqs <- prompt.ApprovalRequest{ApprovalID: id}
		n++
	}
	for done := 0; done < n; {
		select {
		case req := <-reqs:
			if err := svc.Approve(ctx, req.ApprovalID, "bob"); err != nil {
				t.Fatalf("approve %s after recovery: %v", req.ApprovalID, err)
			}
		case a := <-ended:
			if a.State != prompt.StateCompleted {
				t.Errorf("prompt %s ended %s: %s", a.PromptID, a.State, a.Error)
			}
			done++
		case <-ctx.Done():
			t.Fatalf("recovered prompts did not finish")
		}
	}
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range conversations {
		ps, err := db.History(ctx, fmt.Sprint("conv", i), "", 100)
		if err != nil {
			t.Fatal(err)
		}
		rec.prompts = append(rec.prompts, ps...)
	}
	rec.toolRuns = countLines(t, logPath)
	integrityOK(t, rawDB(t, dbPath))
	return rec
}

func countLines(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for line := range strings.Lines(string(b)) {
		counts[strings.TrimSpace(line)]++
	}
	return counts
}

// checkInvariants asserts what every crash must preserve: no approval the
// child reported is lost or undone, none is left pending, no tool ran
// twice, and every call that finished successfully ran exactly once.
func checkInvariants(t *testing.T, run crashRun, rec recovery) {
	t.Helper()
	ctx := context.Background()
	for _, id := range run.pending {
		if _, err := rec.db.FindApproval(ctx, id); err != nil {
			t.Errorf("approval %s reported pending before the crash: %v", id, err)
		}
	}
	for _, id := range run.approved {
		if slices.Contains(rec.reemitted, id) {
			t.Errorf("approval %s was decided before the crash but asked again", id)
		}
	}
	for key, n := range rec.toolRuns {
		if n > 1 {
			t.Errorf("tool ran %d times for %s", n, key)
		}
	}
	for _, p := range rec.prompts {
		if p.State != prompt.StateCompleted {
			t.Errorf("prompt %s is %s", p.ID, p.State)
		}
		for _, it := range p.Output {
			c := it.Call
			if c == nil {
				continue
			}
			key := p.ID + "/" + c.ID
			switch {
			case c.Status == prompt.CallDone && c.Result.Type == prompt.ResultSuccess:
				if rec.toolRuns[key] != 1 {
					t.Errorf("%s succeeded but ran %d times", key, rec.toolRuns[key])
				}
			case c.Status == prompt.CallInterrupted:
				if c.Result == nil || c.Result.Error != prompt.InterruptedError {
					t.Errorf("%s interrupted with result %+v", key, c.Result)
				}
			default:
				t.Errorf("%s ended %s with %+v", key, c.Status, c.Result)
			}
			if ref, err := rec.db.FindApproval(ctx, c.Approval.ID); err != nil || ref.Status != prompt.ApprovalApproved {
				t.Errorf("approval row of %s: %+v, %v; every call was approved", key, ref, err)
			}
		}
	}
}

func crashPaths(t *testing.T) (dbPath, logPath string) {
	dir := t.TempDir()
	return filepath.Join(dir, "tollgate.db"), filepath.Join(dir, "tool.log")
}

func TestCrashAfterPauseIsSaved(t *testing.T) {
	dbPath, logPath := crashPaths(t)
	run := runCrashChild(t, dbPath, logPath, "pause", 3, 1, 0)
	rec := recoverAndFinish(t, dbPath, logPath, 3, 1)
	checkInvariants(t, run, rec)
	if len(rec.logBefore) != 0 {
		t.Errorf("the tool ran before any approval: %v", rec.logBefore)
	}
	slices.Sort(run.pending)
	slices.Sort(rec.reemitted)
	if len(run.pending) != 3 || !slices.Equal(run.pending, rec.reemitted) {
		t.Errorf("pending before the crash %v, asked again after %v", run.pending, rec.reemitted)
	}
	if len(rec.toolRuns) != 3 {
		t.Errorf("tool runs after approval: %v", rec.toolRuns)
	}
}

func TestCrashAfterApprovalIsSaved(t *testing.T) {
	dbPath, logPath := crashPaths(t)
	run := runCrashChild(t, dbPath, logPath, "approved", 2, 1, 0)
	// Which approval the child decided is the one not asked again.
	rec := recoverAndFinish(t, dbPath, logPath, 2, 1)
	checkInvariants(t, run, rec)
	if len(rec.logBefore) != 0 {
		t.Errorf("the tool ran before the crash: %v", rec.logBefore)
	}
	if len(run.pending) != 2 || len(rec.reemitted) != 1 {
		t.Fatalf("pending before %v, asked again %v", run.pending, rec.reemitted)
	}
	// Approved means "certainly not started": recovery runs it, once.
	if len(rec.toolRuns) != 2 {
		t.Errorf("tool runs: %v", rec.toolRuns)
	}
}

func TestCrashDuringToolInvocation(t *testing.T) {
	dbPath, logPath := crashPaths(t)
	run := runCrashChild(t, dbPath, logPath, "invoke", 2, 1, 0)
	if len(countLines(t, logPath)) != 1 {
		t.Fatalf("the child did not crash inside the tool")
	}
	rec := recoverAndFinish(t, dbPath, logPath, 2, 1)
	checkInvariants(t, run, rec)
	interrupted := 0
	for _, p := range rec.prompts {
		for _, it := range p.Output {
			if it.Call != nil && it.Call.Status == prompt.CallInterrupted {
				interrupted++
				if rec.toolRuns[p.ID+"/"+it.Call.ID] != 1 {
					t.Errorf("interrupted call ran %d times", rec.toolRuns[p.ID+"/"+it.Call.ID])
				}
			}
		}
	}
	if interrupted != 1 {
		t.Errorf("%d interrupted calls, want 1", interrupted)
	}
}

func TestCrashDuringBurstOfSaves(t *testing.T) {
	for i := range 3 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			dbPath, logPath := crashPaths(t)
			const conversations, rounds = 24, 3
			run := runCrashChild(t, dbPath, logPath, "burst", conversations, rounds, 20+10*i)
			rec := recoverAndFinish(t, dbPath, logPath, conversations, rounds)
			checkInvariants(t, run, rec)
			statuses := map[prompt.CallStatus]int{}
			for _, p := range rec.prompts {
				for _, it := range p.Output {
					if it.Call != nil {
						statuses[it.Call.Status]++
					}
				}
			}
			t.Logf("before the kill: %d asked, %d approved, %d tool runs; after: %d asked again, calls %v",
				len(run.pending), len(run.approved), len(rec.logBefore), len(rec.reemitted), statuses)
			if len(rec.prompts) != conversations {
				t.Errorf("%d prompts after recovery, want %d", len(rec.prompts), conversations)
			}
		})
	}
}

// TestCrashAtEveryStepBoundary kills the child right after each kind of
// step is durable: the model's calls saved as queued, a decision settled
// onto its call, a call saved as executing, a result saved. Whatever the
// point, nothing approved is lost and nothing runs twice.
func TestCrashAtEveryStepBoundary(t *testing.T) {
	for _, tc := range []struct {
		point string
		// ranBefore is how many tool runs the child made before it died.
		ranBefore, interrupted int
		// created is how many prompts the child created before it died:
		// at "queued" it dies at the first model turn, maybe before its
		// second message.
		created []int
	}{
		{point: "queued", created: []int{1, 2}},
		{point: "settled"},
		{point: "executing", interrupted: 1},
		{point: "result", ranBefore: 1},
	} {
		t.Run(tc.point, func(t *testing.T) {
			dbPath, logPath := crashPaths(t)
			run := runCrashChild(t, dbPath, logPath, tc.point, 2, 1, 0)
			if got := len(countLines(t, logPath)); got != tc.ranBefore {
				t.Fatalf("tool ran %d times before the crash, want %d", got, tc.ranBefore)
			}
			rec := recoverAndFinish(t, dbPath, logPath, 2, 1)
			checkInvariants(t, run, rec)
			want := tc.created
			if want == nil {
				want = []int{2}
			}
			if !slices.Contains(want, len(rec.prompts)) {
				t.Fatalf("%d prompts after recovery, want %v", len(rec.prompts), want)
			}
			// Executing is saved before the tool starts: after a crash there
			// it may have run, so its outcome is unknown and it never runs.
			interrupted := 0
			for _, p := range rec.prompts {
				for _, it := range p.Output {
					if c := it.Call; c != nil && c.Status == prompt.CallInterrupted {
						interrupted++
					}
				}
			}
			if interrupted != tc.interrupted {
				t.Errorf("%d calls interrupted, want %d", interrupted, tc.interrupted)
			}
		})
	}
}
