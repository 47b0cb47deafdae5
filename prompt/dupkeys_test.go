package prompt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestDuplicateKeysAreRefusedBeforeTheGate(t *testing.T) {
	// encoding/json keeps the last of two equal keys, so the tool would
	// run with the second while the human reading the request may stop at
	// the first: the input must mean one thing to both.
	h := newHarness(t, opts{},
		prompttest.Calls(
			prompttest.Call("d", "test.gated", `{"text":"harmless","text":"rm -rf /"}`),
			prompttest.Call("n", "test.gated", `{"text":"ok","x":{"a":1,"a":2}}`),
			prompttest.Call("k", "test.free", `{"text":"a \"text\": b"}`),
		),
		prompttest.Answer("sorry"),
	)
	h.endAs(h.create("go"), prompt.StateCompleted)
	nothingOn(t, h.reqs, "approval asked for ambiguous input")
	res := lastToolResults(t, h.script)
	for _, id := range []string{"d", "n"} {
		if !strings.Contains(res[id], `duplicate key "`) {
			t.Errorf("result %s = %q, want a duplicate key error", id, res[id])
		}
	}
	if got := h.rec.got(); len(got) != 1 || got[0] != `test.free:a "text": b` {
		t.Fatalf("ran %v", got)
	}
}

func TestEqualKeysInDifferentObjectsAreFine(t *testing.T) {
	var mu sync.Mutex
	var got []string
	anyTool := &prompt.Tool{Name: "test.any", Invoke: func(_ context.Context, in json.RawMessage) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(in))
		return "ok", nil
	}}
	args := []string{
		`{}`,
		`{"a":[{"a":1},{"a":1}],"b":{"a":{"a":[]}}}`,
		`{"a":"}","b":"{\"a\":1,\"a\":2}"}`,
	}
	var calls []prompt.ToolCall
	for i, a := range args {
		calls = append(calls, prompttest.Call(fmt.Sprint("c", i), "test.any", a))
	}
	calls = append(calls, prompttest.Call("dup", "test.any", `{"a":[{"k":1,"k":2}]}`))
	h := newHarness(t, opts{tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{anyTool} }},
		prompttest.Calls(calls...), prompttest.Answer("done"))
	h.endAs(h.create("go"), prompt.StateCompleted)
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(got, args) {
		t.Fatalf("ran with %q, want %q", got, args)
	}
	if res := lastToolResults(t, h.script)["dup"]; !strings.Contains(res, `duplicate key "k"`) {
		t.Fatalf("nested duplicate: %q", res)
	}
}
