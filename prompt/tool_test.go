package prompt_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

func TestNewServiceRejectsBadConfig(t *testing.T) {
	good := newRecorder().tool(t, "a.b", nil)
	for name, tools := range map[string][]*prompt.Tool{
		"duplicate": {good, good},
		"bad name":  {{Name: "has space", Invoke: good.Invoke}},
		"no invoke": {{Name: "x"}},
		"nil":       {nil},
	} {
		if _, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(), Tools: tools}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for name, cfg := range map[string]prompt.Config{
		"no model":         {Store: prompttest.NewStore()},
		"no store":         {Model: prompttest.NewModel()},
		"negative workers": {Model: prompttest.NewModel(), Store: prompttest.NewStore(), Workers: -1},
	} {
		if _, err := prompt.NewService(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestToolsAndGatedAreReported(t *testing.T) {
	h := newHarness(t, opts{})
	var names []string
	for _, d := range h.svc.Tools() {
		names = append(names, d.Name)
		var schema map[string]any
		if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s parameters = %s, %v", d.Name, d.Parameters, err)
		}
	}
	if !reflect.DeepEqual(names, []string{"test.free", "test.gated"}) {
		t.Fatalf("tools = %v", names)
	}
	want := []prompt.ToolSummary{{Name: "test.free", Effect: prompt.EffectRead}, {Name: "test.gated", Effect: prompt.EffectSend, Asks: true}}
	if got := h.svc.Summaries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("summaries = %+v, want %+v", got, want)
	}
}

// TestStaticGateOnAHandBuiltTool covers the other way to make a tool: a
// raw-JSON Invoke with the static gate Always and no schema.
func TestStaticGateOnAHandBuiltTool(t *testing.T) {
	var ran atomic.Int32
	raw := &prompt.Tool{
		Name: "test.raw", Description: "raw",
		Gate: prompt.Always("static reason"),
		Invoke: func(_ context.Context, in json.RawMessage) (string, error) {
			ran.Add(1)
			return "got " + string(in), nil
		},
	}
	h := newHarness(t, opts{tools: func(*recorder) []*prompt.Tool { return []*prompt.Tool{raw} }},
		prompttest.Calls(prompttest.Call("c1", "test.raw", `{"any":1}`)), prompttest.Answer("done"))
	id := h.create("go")
	req := h.request()
	if req.Reason != "static reason" || ran.Load() != 0 {
		t.Fatalf("request %+v, ran %d", req, ran.Load())
	}
	h.approve(req.ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	if got := lastToolResults(t, h.script)["c1"]; got != `got {"any":1}` || ran.Load() != 1 {
		t.Fatalf("result %q, ran %d", got, ran.Load())
	}
}
