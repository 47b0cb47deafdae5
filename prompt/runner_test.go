package prompt_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"tollgate/prompt"
)

// countingModel is a blockingModel that counts the requests under way.
type countingModel struct {
	*blockingModel
	now, most atomic.Int32
}

func (m *countingModel) Complete(ctx context.Context, req prompt.Request) (prompt.Response, error) {
	n := m.now.Add(1)
	for {
		most := m.most.Load()
		if n <= most || m.most.CompareAndSwap(most, n) {
			break
		}
	}
	defer m.now.Add(-1)
	return m.blockingModel.Complete(ctx, req)
}

func TestWorkersBoundTheModelCallsAndTheRestQueueInOrder(t *testing.T) {
	m := &countingModel{blockingModel: newBlockingModel()}
	h := newHarness(t, opts{model: m, workers: 2})
	const n = 6
	ids := map[string]string{} // conversation → prompt
	for i := range n {
		conv := fmt.Sprint("conv-", i)
		c, err := h.svc.Create(context.Background(), conv, conv)
		if err != nil {
			t.Fatal(err)
		}
		ids[conv] = c.PromptID
		// Two workers take the first two; the rest wait, next in line first.
		if want := max(0, i-1); c.Position != want {
			t.Fatalf("prompt %d: position %d, want %d", i, c.Position, want)
		}
	}
	first := map[string]bool{}
	for range 2 {
		first[waitFor(t, m.started).Messages[0].Text] = true
	}
	if !first["conv-0"] || !first["conv-1"] {
		t.Fatalf("first model calls were for %v", first)
	}
	nothingOn(t, m.started, "a third model call while two workers were busy")
	for i := 2; i < n; i++ {
		// Each release frees one worker, which takes the next in line.
		m.release <- struct{}{}
		if got := waitFor(t, m.started).Messages[0].Text; got != fmt.Sprint("conv-", i) {
			t.Fatalf("after %d releases the model got %s, want conv-%d", i-1, got, i)
		}
	}
	for range 2 {
		m.release <- struct{}{}
	}
	ended := map[string]bool{}
	for range n {
		a := waitFor(t, h.ended)
		if a.State != prompt.StateCompleted || ids[a.ConversationID] != a.PromptID || ended[a.PromptID] {
			t.Fatalf("ended %+v", a)
		}
		ended[a.PromptID] = true
	}
	if most := m.most.Load(); most != 2 {
		t.Fatalf("at most %d model calls at once, want 2", most)
	}
}
