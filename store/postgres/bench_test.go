package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/store/pgtest"
	"tollgate/store/postgres"
)

// The replica benchmarks run prompt.Services in one process, each on its
// own connection pool to one database, as replicas on separate hosts
// would be: they share nothing but PostgreSQL.

// gatedModel asks for one call of test.gated, then ends the prompt.
var gatedModel = prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
	if len(req.Messages) == 1 {
		return prompt.Response{ToolCalls: []prompt.ToolCall{{ID: "c1", Name: "test.gated", Arguments: `{}`}}}, nil
	}
	return prompt.Response{Text: "done"}, nil
})

func openReplica(b *testing.B, url string) *postgres.DB {
	b.Helper()
	db, err := postgres.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// replicaSet is n services sharing one database; approval IDs arrive on
// asked, and ended counts the prompts that ended on any of them.
type replicaSet struct {
	svcs  []*prompt.Service
	asked chan string
	ended chan prompt.Answer
}

func newReplicaSet(b *testing.B, n int) *replicaSet {
	b.Helper()
	url := pgtest.URL(b)
	tool, err := prompt.NewTool("test.gated", "asks first", prompt.AlwaysFor[struct{}]("risky"),
		func(context.Context, struct{}) (string, error) { return "ok", nil })
	if err != nil {
		b.Fatal(err)
	}
	rs := &replicaSet{asked: make(chan string, 1<<16), ended: make(chan prompt.Answer, 1<<16)}
	for i := range n {
		db := openReplica(b, url)
		svc, err := prompt.NewService(prompt.Config{
			Model: gatedModel, Store: db, Leases: db, Tools: []*prompt.Tool{tool},
			HistoryLimit: 1, Replica: fmt.Sprint("r", i+1),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { svc.Close(context.Background()) })
		svc.OnApprovalRequested(func(_ context.Context, req prompt.ApprovalRequest) { rs.asked <- req.ApprovalID })
		svc.OnEnded(func(_ context.Context, a prompt.Answer) { rs.ended <- a })
		rs.svcs = append(rs.svcs, svc)
	}
	return rs
}

// waiting creates n prompts, spread over the replicas, and returns their
// approval IDs once each waits for its decision.
func (rs *replicaSet) waiting(b *testing.B, n int) []string {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if _, err := rs.svcs[i%len(rs.svcs)].Create(ctx, fmt.Sprint("conv", i), "go"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		select {
		case ids[i] = <-rs.asked:
		case <-time.After(time.Minute):
			b.Fatalf("%d of %d requests made", i, n)
		}
	}
	return ids
}

// benchmarkDecisions presses Approve on b.N waiting requests from eight
// pressers, press i at replica i mod n, and times until every prompt has
// run its call and ended: a decision counts once its consequence is done.
func benchmarkDecisions(b *testing.B, replicas int) {
	rs := newReplicaSet(b, replicas)
	ids := rs.waiting(b, b.N)
	ctx := context.Background()
	b.ResetTimer()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(ids); i = int(next.Add(1)) - 1 {
				if err := rs.svcs[i%replicas].Approve(ctx, ids[i], "alice"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	pressed := b.Elapsed()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	for range b.N {
		select {
		case a := <-rs.ended:
			if a.State != prompt.StateCompleted {
				b.Fatalf("ended %s: %s", a.State, a.Error)
			}
		case <-time.After(time.Minute):
			b.Fatal("a decided prompt did not end")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(b.N)/pressed.Seconds(), "presses/s")
}

// BenchmarkDecisionsPostgres1Replica measures decisions carried through
// (the compare-and-set, then the call run and the prompt ended) by one
// service on PostgreSQL.
func BenchmarkDecisionsPostgres1Replica(b *testing.B) { benchmarkDecisions(b, 1) }

// BenchmarkDecisionsPostgres3Replicas is the same load spread over three
// services that share the database, each prompt advanced under its lease.
func BenchmarkDecisionsPostgres3Replicas(b *testing.B) { benchmarkDecisions(b, 3) }

// BenchmarkTakeover measures the time from the death of a replica that is
// running a tool call to another replica's takeover of its prompt: the
// moment the survivor asks the model with the call's result "outcome
// unknown". The lease TTL is 500 ms; the survivor's takeover loop looks
// every TTL, so a takeover is due between one and two TTLs after the
// last renewal.
func BenchmarkTakeover(b *testing.B) {
	const ttl = 500 * time.Millisecond
	ctx := context.Background()
	url := pgtest.URL(b)
	running := make(chan struct{}, 1)
	slow, err := prompt.NewTool("test.slow", "runs until cancelled", nil,
		func(ctx context.Context, _ struct{}) (string, error) {
			running <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		})
	if err != nil {
		b.Fatal(err)
	}
	tools := []*prompt.Tool{slow}
	var takenAt atomic.Pointer[time.Time]
	model := prompt.ModelFunc(func(_ context.Context, req prompt.Request) (prompt.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case len(req.Messages) == 1:
			return prompt.Response{ToolCalls: []prompt.ToolCall{{ID: "c1", Name: "test.slow", Arguments: `{}`}}}, nil
		case strings.Contains(last.Text, prompt.InterruptedError):
			now := time.Now()
			takenAt.CompareAndSwap(nil, &now)
		}
		return prompt.Response{Text: "done"}, nil
	})
	survivorDB := openReplica(b, url)
	survivor, err := prompt.NewService(prompt.Config{Model: model, Store: survivorDB, Leases: survivorDB, Tools: tools,
		Replica: "survivor", LeaseTTL: ttl, HistoryLimit: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer survivor.Close(ctx)
	ended := make(chan prompt.Answer, 1)
	survivor.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	// Recover starts the takeover loop.
	if _, err := survivor.Recover(ctx); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		dead := &atomic.Bool{}
		store := mortalDB{DB: openReplica(b, url), dead: dead}
		victim, err := prompt.NewService(prompt.Config{Model: model, Store: store, Leases: store, Tools: tools,
			Replica: fmt.Sprint("victim", i), LeaseTTL: ttl, HistoryLimit: 1})
		if err != nil {
			b.Fatal(err)
		}
		takenAt.Store(nil)
		if _, err := victim.Create(ctx, fmt.Sprint("conv", i), "go"); err != nil {
			b.Fatal(err)
		}
		<-running
		// Renewals run every TTL/3 from the start: a death at a random
		// point between two of them.
		time.Sleep(ttl/3 + time.Duration(i%10)*ttl/30)
		b.StartTimer()
		died := time.Now()
		dead.Store(true)
		var a prompt.Answer
		select {
		case a = <-ended:
		case <-time.After(20 * ttl):
			b.Fatal("no takeover")
		}
		b.StopTimer()
		at := takenAt.Load()
		if a.State != prompt.StateCompleted || at == nil {
			b.Fatalf("ended %s (%s) without the survivor seeing the outcome unknown", a.State, a.Error)
		}
		total += at.Sub(died)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		victim.Close(cctx)
		cancel()
		b.StartTimer()
	}
	mean := total / time.Duration(b.N)
	b.ReportMetric(float64(mean.Milliseconds()), "ms/takeover")
	b.ReportMetric(float64(mean)/float64(ttl), "TTLs/takeover")
}
