package prompt_test

import (
	"context"
	"sync"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// fakeSource is a tool set that changes when the test says so.
type fakeSource struct {
	mu     sync.Mutex
	tools  []*prompt.Tool
	change []func()
}

func (f *fakeSource) Tools() []*prompt.Tool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*prompt.Tool(nil), f.tools...)
}

func (f *fakeSource) OnChange(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.change = append(f.change, fn)
}

func (f *fakeSource) set(tools ...*prompt.Tool) {
	f.mu.Lock()
	f.tools = tools
	fns := append([]func(){}, f.change...)
	f.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// TestToolSourcesJoinAndChange: a source's tools are offered with the
// static ones; a changed set is offered from the next model turn; a
// source tool whose name is taken is left out, not the whole set.
func TestToolSourcesJoinAndChange(t *testing.T) {
	rec := newRecorder()
	src := &fakeSource{}
	src.tools = []*prompt.Tool{rec.tool(t, "mcp.a.one", nil), rec.tool(t, "test.free", nil)}
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(),
		Tools: []*prompt.Tool{rec.tool(t, "test.free", nil)}, Sources: []prompt.ToolSource{src}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	names := func() []string {
		var n []string
		for _, d := range svc.Tools() {
			n = append(n, d.Name)
		}
		return n
	}
	if got := names(); len(got) != 2 || got[0] != "test.free" || got[1] != "mcp.a.one" {
		t.Fatalf("tools %v, want the static one and the source's new one", got)
	}
	src.set(rec.tool(t, "mcp.a.two", nil))
	if got := names(); len(got) != 2 || got[1] != "mcp.a.two" {
		t.Fatalf("after a change: %v", got)
	}
	src.set()
	if got := names(); len(got) != 1 {
		t.Fatalf("after the source emptied: %v", got)
	}
}
