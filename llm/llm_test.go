package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"tollgate/llm"
	"tollgate/llm/llmtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// sleeper records the waits between attempts instead of waiting.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return ctx.Err()
}

func (s *sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

func newModel(t *testing.T, cfg llm.Config) (*llm.Model, *sleeper) {
	t.Helper()
	sl := &sleeper{}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sl.Sleep
	}
	m, err := llm.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, sl
}

var fetchTool = prompt.ToolDef{
	Name:        "web-fetch.fetch",
	Description: "Fetch a web page.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`),
}

func userRequest(text string) prompt.Request {
	return prompt.Request{
		System:   "You are a test.",
		Messages: []prompt.Message{{Role: prompt.RoleUser, Text: text}},
		Tools:    []prompt.ToolDef{fetchTool},
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  llm.Config
		want string
	}{
		{"no scheme", llm.Config{BaseURL: "localhost:11434/v1", Model: "m"}, "http:// or https://"},
		{"ftp", llm.Config{BaseURL: "ftp://example.com/v1", Model: "m"}, "http:// or https://"},
		{"no host", llm.Config{BaseURL: "http:///v1", Model: "m"}, "no host"},
		{"query", llm.Config{BaseURL: "http://h/v1?x=1", Model: "m"}, "query"},
		{"not a URL", llm.Config{BaseURL: "http://h:port/v1", Model: "m"}, "not a URL"},
		{"no model", llm.Config{BaseURL: "http://h/v1"}, "model name is empty"},
		{"negative timeout", llm.Config{Model: "m", Timeout: -time.Second}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := llm.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := llm.New(llm.Config{Model: "m"}); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if _, err := llm.New(llm.Config{BaseURL: "http://localhost:11434/v1/", Model: "llama3.2:3b"}); err != nil {
		t.Errorf("Ollama: %v", err)
	}
}

func TestCompleteSendsToolsAndDecodesToolCall(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.RequireKey("sk-test")
	srv.RequireModel("test-model")
	srv.Add(llmtest.Reply{
		Text: "Let me look.",
		Calls: []llmtest.Call{
			{ID: "call_1", Name: "web-fetch__fetch", Arguments: `{"url":"https://example.com"}`},
			{ID: "call_2", Name: "my_-tool__run", Arguments: `{}`},
		},
	})
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL(), APIKey: "sk-test"})
	req := userRequest("fetch example.com")
	req.Tools = append(req.Tools, prompt.ToolDef{Name: "my_tool.run"}) // no parameters

	resp, err := m.Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := prompt.Response{Text: "Let me look.", ToolCalls: []prompt.ToolCall{
		{ID: "call_1", Name: "web-fetch.fetch", Arguments: `{"url":"https://example.com"}`},
		{ID: "call_2", Name: "my_tool.run", Arguments: `{}`},
	}}
	if fmt.Sprint(resp) != fmt.Sprint(want) {
		t.Errorf("response = %+v\nwant %+v", resp, want)
	}

	got := srv.Wait(1)
	if h := got.Header.Get("Authorization"); h != "Bearer sk-test" {
		t.Errorf("Authorization = %q", h)
	}
	if got.Model != "test-model" {
		t.Errorf("model = %q", got.Model)
	}
	if len(got.Messages) != 2 || got.Messages[0].Role != "system" || got.Messages[0].Content != "You are a test." ||
		got.Messages[1].Role != "user" || got.Messages[1].Content != "fetch example.com" {
		t.Errorf("messages = %+v", got.Messages)
	}
	if len(got.Tools) != 2 {
		t.Fatalf("tools = %+v", got.Tools)
	}
	if got.Tools[0].Name != "web-fetch__fetch" || got.Tools[0].Description != "Fetch a web page." ||
		string(got.Tools[0].Parameters) != string(fetchTool.Parameters) {
		t.Errorf("tool 0 = %+v", got.Tools[0])
	}
	if got.Tools[1].Name != "my_-tool__run" || string(got.Tools[1].Parameters) != `{"type":"object","properties":{}}` {
		t.Errorf("tool 1 = %+v, want an empty object schema", got.Tools[1])
	}
}

func TestCompleteWithoutKeySendsNoAuthorization(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Text("hello"))
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL()})
	resp, err := m.Complete(t.Context(), prompt.Request{Messages: []prompt.Message{{Role: prompt.RoleUser, Text: "hi"}}})
	if err != nil || resp.Text != "hello" || len(resp.ToolCalls) != 0 {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	got := srv.Wait(1)
	if h, ok := got.Header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", h)
	}
	if len(got.Messages) != 1 || got.Messages[0].Role != "user" {
		t.Errorf("without a system prompt, messages = %+v", got.Messages)
	}
	if len(got.Tools) != 0 {
		t.Errorf("tools = %+v", got.Tools)
	}
}

// A history with tool calls and results reaches the (strict) server with
// every call answered by its result, names mapped, IDs kept.
func TestCompleteSendsHistoryWithToolResults(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Text("done"))
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL()})
	req := prompt.Request{
		System: "sys",
		Tools:  []prompt.ToolDef{fetchTool},
		Messages: []prompt.Message{
			{Role: prompt.RoleUser, Text: "first"},
			{Role: prompt.RoleAssistant, Text: "Fetching two pages.", ToolCalls: []prompt.ToolCall{
				{ID: "c1", Name: "web-fetch.fetch", Arguments: `{"url":"https://a.example"}`},
				{ID: "c2", Name: "web-fetch.fetch", Arguments: `{"url":`},
			}},
			{Role: prompt.RoleTool, ToolCallID: "c1", Text: "page A"},
			{Role: prompt.RoleTool, ToolCallID: "c2", Text: ""},
			{Role: prompt.RoleAssistant, Text: "Here it is."},
			{Role: prompt.RoleUser, Text: "again"},
			{Role: prompt.RoleAssistant, ToolCalls: []prompt.ToolCall{
				{ID: "c3", Name: "invented tool!", Arguments: `{}`},
			}},
			{Role: prompt.RoleTool, ToolCallID: "c3", Text: `Error: unknown tool "invented tool!"`},
			{Role: prompt.RoleAssistant}, // says nothing: dropped
			{Role: prompt.RoleUser, Text: ""},
		},
	}
	if _, err := m.Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	got := srv.Wait(1)
	type msg struct{ role, content, callID, calls string }
	var gotMsgs []msg
	for _, m := range got.Messages {
		gotMsgs = append(gotMsgs, msg{m.Role, m.Content, m.ToolCallID, fmt.Sprint(m.ToolCalls)})
	}
	want := []msg{
		{"system", "sys", "", "[]"},
		{"user", "first", "", "[]"},
		{"assistant", "Fetching two pages.", "", `[{c1 web-fetch__fetch {"url":"https://a.example"}} {c2 web-fetch__fetch {"url":}]`},
		{"tool", "page A", "c1", "[]"},
		{"tool", "(no output)", "c2", "[]"},
		{"assistant", "Here it is.", "", "[]"},
		{"user", "again", "", "[]"},
		{"assistant", "", "", "[{c3 invented-tool- {}}]"},
		{"tool", `Error: unknown tool "invented tool!"`, "c3", "[]"},
		{"user", "(empty message)", "", "[]"},
	}
	if fmt.Sprint(gotMsgs) != fmt.Sprint(want) {
		t.Errorf("messages:\n got %v\nwant %v", gotMsgs, want)
	}
}

func TestCompleteRefusesMalformedRequest(t *testing.T) {
	m, _ := newModel(t, llm.Config{BaseURL: "http://127.0.0.1:1/v1"})
	for name, req := range map[string]prompt.Request{
		"tool message without ID": {Messages: []prompt.Message{{Role: prompt.RoleTool, Text: "x"}}},
		"unknown role":            {Messages: []prompt.Message{{Role: "system", Text: "x"}}},
		"tool name too long":      {Tools: []prompt.ToolDef{{Name: strings.Repeat("a.", 30)}}},
		"bad parameters":          {Tools: []prompt.ToolDef{{Name: "t", Parameters: json.RawMessage(`{`)}}},
	} {
		if _, err := m.Complete(t.Context(), req); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The adapter passes arguments through as the model wrote them, valid
// JSON or not, and maps back names it knows.
func TestCompletePassesThroughBadArgumentsAndUnknownNames(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.CallTools(
		llmtest.Call{ID: "a", Name: "web-fetch__fetch", Arguments: `{"url": "https://exa`},
		llmtest.Call{ID: "b", Name: "made_up", Arguments: `not json at all`},
		llmtest.Call{ID: "c", Name: "web-fetch__fetch", Arguments: ``},
	))
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL()})
	resp, err := m.Complete(t.Context(), userRequest("go"))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := []prompt.ToolCall{
		{ID: "a", Name: "web-fetch.fetch", Arguments: `{"url": "https://exa`},
		{ID: "b", Name: "made_up", Arguments: `not json at all`},
		{ID: "c", Name: "web-fetch.fetch", Arguments: ``},
	}
	if fmt.Sprint(resp.ToolCalls) != fmt.Sprint(want) {
		t.Errorf("tool calls = %q\nwant %q", resp.ToolCalls, want)
	}
}

// Through the real core: a call with broken arguments becomes an error
// result the model sees on its next turn, and the prompt completes.
func TestBadArgumentsBecomeAnErrorResultForTheModel(t *testing.T) {
	type in struct {
		URL string `json:"url"`
	}
	invoked := make(chan string, 1)
	tool, err := prompt.NewTool("web-fetch.fetch", "Fetch a page.", nil,
		func(_ context.Context, in in) (string, error) { invoked <- in.URL; return "page", nil })
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.CallTool("web-fetch__fetch", `{"url": "https://exa`), llmtest.Text("Sorry, my mistake."))
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL()})
	svc, err := prompt.NewService(prompt.Config{Model: m, Store: prompttest.NewStore(), Tools: []*prompt.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(context.Background()) })
	ended := make(chan prompt.Answer, 1)
	svc.OnEnded(func(_ context.Context, a prompt.Answer) { ended <- a })
	if _, err := svc.Create(t.Context(), "chat", "fetch it"); err != nil {
		t.Fatal(err)
	}
	var a prompt.Answer
	select {
	case a = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the prompt did not end")
	}
	if a.State != prompt.StateCompleted || a.Text != "Sorry, my mistake." {
		t.Fatalf("prompt = %s %q (%s)", a.State, a.Text, a.Error)
	}
	second := srv.Wait(2)
	last := second.Last()
	if last.Role != "tool" || !strings.HasPrefix(last.Content, "Error:") {
		t.Errorf("the model was shown %+v, want an error result", last)
	}
	select {
	case u := <-invoked:
		t.Errorf("tool ran with %q", u)
	default:
	}
}

func TestCompleteAcceptsLegacyFunctionCall(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Reply{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
		"message":{"role":"assistant","content":null,"function_call":{"name":"web-fetch__fetch","arguments":"{}"}},
		"finish_reason":"function_call"}]}`})
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL()})
	resp, err := m.Complete(t.Context(), userRequest("go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "web-fetch.fetch" || resp.ToolCalls[0].Arguments != "{}" {
		t.Errorf("tool calls = %+v", resp.ToolCalls)
	}
}

func TestCompleteRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []llmtest.Reply
		waits   []time.Duration
	}{
		{
			name:    "429 with Retry-After seconds",
			replies: []llmtest.Reply{llmtest.Fail(429, "Rate limit reached").WithHeader("Retry-After", "7"), llmtest.Text("ok")},
			waits:   []time.Duration{7 * time.Second},
		},
		{
			name: "429 with Retry-After date",
			replies: []llmtest.Reply{
				llmtest.Fail(429, "slow down").WithHeader("Retry-After", "Sun, 22 Nov 2026 10:00:30 GMT"),
				llmtest.Text("ok"),
			},
			waits: []time.Duration{30 * time.Second},
		},
		{
			name:    "429 without Retry-After",
			replies: []llmtest.Reply{llmtest.Fail(429, "slow down"), llmtest.Text("ok")},
			waits:   []time.Duration{time.Second},
		},
		{
			name:    "500 then success",
			replies: []llmtest.Reply{llmtest.Fail(500, "The server had an error"), llmtest.Text("ok")},
			waits:   []time.Duration{time.Second},
		},
		{
			name: "502 HTML, 503, 504 with backoff",
			replies: []llmtest.Reply{
				{Status: 502, Body: "<html>Bad Gateway</html>"},
				llmtest.Fail(503, "overloaded"),
				llmtest.Fail(504, "gateway timeout").WithHeader("Retry-After", "junk"),
				llmtest.Text("ok"),
			},
			waits: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		},
		{
			name:    "network error then success",
			replies: []llmtest.Reply{{Disconnect: true}, llmtest.Text("ok")},
			waits:   []time.Duration{time.Second},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t)
			srv.Add(tc.replies...)
			now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
			m, sl := newModel(t, llm.Config{BaseURL: srv.URL(), Now: func() time.Time { return now }})
			resp, err := m.Complete(t.Context(), userRequest("hi"))
			if err != nil || resp.Text != "ok" {
				t.Fatalf("Complete = %+v, %v", resp, err)
			}
			if fmt.Sprint(sl.Waits()) != fmt.Sprint(tc.waits) {
				t.Errorf("waits = %v, want %v", sl.Waits(), tc.waits)
			}
			if n := len(srv.Requests()); n != len(tc.replies) {
				t.Errorf("%d requests, want %d", n, len(tc.replies))
			}
		})
	}
}

func TestCompleteGivesUpAfterMaxRetries(t *testing.T) {
	srv := llmtest.NewServer(t)
	for range 4 {
		srv.Add(llmtest.Fail(503, "The engine is currently overloaded"))
	}
	m, sl := newModel(t, llm.Config{BaseURL: srv.URL()})
	_, err := m.Complete(t.Context(), userRequest("hi"))
	var e *llm.Error
	if !errors.As(err, &e) || e.StatusCode != 503 || e.Attempts != 4 {
		t.Fatalf("err = %#v", err)
	}
	want := "the model endpoint answered 503: The engine is currently overloaded (after 4 attempts)"
	if err.Error() != want {
		t.Errorf("err = %q\nwant %q", err, want)
	}
	if fmt.Sprint(sl.Waits()) != "[1s 2s 4s]" {
		t.Errorf("waits = %v", sl.Waits())
	}
}

func TestCompleteWithRetriesOff(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Fail(500, "boom"))
	m, sl := newModel(t, llm.Config{BaseURL: srv.URL(), MaxRetries: -1})
	if _, err := m.Complete(t.Context(), userRequest("hi")); err == nil || err.Error() != "the model endpoint answered 500: boom" {
		t.Fatalf("err = %v", err)
	}
	if len(sl.Waits()) != 0 || len(srv.Requests()) != 1 {
		t.Errorf("retried: waits %v, %d requests", sl.Waits(), len(srv.Requests()))
	}
}

func TestCompleteRefusesToWaitTooLong(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Fail(429, "Rate limit reached").WithHeader("Retry-After", "3600"))
	m, sl := newModel(t, llm.Config{BaseURL: srv.URL()})
	_, err := m.Complete(t.Context(), userRequest("hi"))
	if err == nil || !strings.Contains(err.Error(), "429") || !strings.Contains(err.Error(), "asks to wait 1h0m0s: try again later") {
		t.Fatalf("err = %v", err)
	}
	if len(sl.Waits()) != 0 {
		t.Errorf("waited %v", sl.Waits())
	}
}

// Answers a retry cannot fix fail at once, with a message naming what to
// check.
func TestCompleteNonRetryableErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*llmtest.Server)
		key   string
		want  string
	}{
		{
			name:  "401 wrong key",
			setup: func(s *llmtest.Server) { s.RequireKey("sk-right") },
			key:   "sk-wrong",
			want:  "the model endpoint answered 401: check LLM_API_KEY",
		},
		{
			name:  "401 missing key",
			setup: func(s *llmtest.Server) { s.RequireKey("sk-right") },
			want:  "the model endpoint answered 401: check LLM_API_KEY",
		},
		{
			name:  "404 model",
			setup: func(s *llmtest.Server) { s.RequireModel("gpt-4o-mini") },
			want:  "the model endpoint answered 404: check LLM_MODEL (\"test-model\") and LLM_BASE_URL ({URL}): The model `test-model` does not exist or you do not have access to it.",
		},
		{
			name:  "400",
			setup: func(s *llmtest.Server) { s.Add(llmtest.Fail(400, "Invalid 'messages[1].content'")) },
			want:  "the model endpoint answered 400: Invalid 'messages[1].content'",
		},
		{
			name:  "403",
			setup: func(s *llmtest.Server) { s.Add(llmtest.Fail(403, "Project does not have access")) },
			want:  "the model endpoint answered 403: check that LLM_API_KEY may use model \"test-model\": Project does not have access",
		},
		{
			name: "429 quota",
			setup: func(s *llmtest.Server) {
				s.Add(llmtest.Reply{Status: 429, Error: llmtest.APIError{Message: "You exceeded your current quota", Type: "insufficient_quota", Code: "insufficient_quota"}})
			},
			want: "the model endpoint answered 429 (insufficient_quota): check the plan and billing of the account behind LLM_API_KEY: You exceeded your current quota",
		},
		{
			name: "context too long",
			setup: func(s *llmtest.Server) {
				s.Add(llmtest.Reply{Status: 400, Error: llmtest.APIError{Message: "maximum context length is 8192 tokens", Type: "invalid_request_error", Code: "context_length_exceeded"}})
			},
			want: "the conversation is too long for model \"test-model\": maximum context length is 8192 tokens",
		},
		{
			name:  "not JSON",
			setup: func(s *llmtest.Server) { s.Add(llmtest.Reply{Body: "<html>It works!</html>"}) },
			want:  "the model endpoint at {URL} sent an answer that is not a chat completion (invalid character '<' looking for beginning of value): check LLM_BASE_URL",
		},
		{
			name: "empty choices",
			setup: func(s *llmtest.Server) {
				s.Add(llmtest.Reply{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}`})
			},
			want: "the model endpoint answered without a choice: check LLM_MODEL (\"test-model\")",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t)
			tc.setup(srv)
			m, sl := newModel(t, llm.Config{BaseURL: srv.URL(), APIKey: tc.key})
			_, err := m.Complete(t.Context(), userRequest("hi"))
			want := strings.ReplaceAll(tc.want, "{URL}", srv.URL())
			if err == nil || err.Error() != want {
				t.Fatalf("err = %v\nwant %s", err, want)
			}
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Errorf("err is %T, not *llm.Error", err)
			}
			if n := len(srv.Requests()); n != 1 || len(sl.Waits()) != 0 {
				t.Errorf("%d requests, waits %v: retried", n, sl.Waits())
			}
		})
	}
}

func TestCompleteUnreachableEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String() + "/v1"
	l.Close() // nothing listens there now: connection refused
	m, sl := newModel(t, llm.Config{BaseURL: base})
	_, err = m.Complete(t.Context(), userRequest("hi"))
	if err == nil || !strings.HasPrefix(err.Error(), "could not reach the model endpoint at "+base+": ") ||
		!strings.Contains(err.Error(), "refused") || !strings.HasSuffix(err.Error(), "(after 4 attempts)") {
		t.Fatalf("err = %v", err)
	}
	var e *llm.Error
	if !errors.As(err, &e) || e.StatusCode != 0 {
		t.Errorf("err = %#v", err)
	}
	if len(sl.Waits()) != 3 {
		t.Errorf("waits = %v", sl.Waits())
	}
}

func TestCompleteTimesOutEachAttempt(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Reply{Text: "too late", Delay: time.Minute}, llmtest.Text("in time"))
	m, sl := newModel(t, llm.Config{BaseURL: srv.URL(), Timeout: 300 * time.Millisecond})
	resp, err := m.Complete(t.Context(), userRequest("hi"))
	if err != nil || resp.Text != "in time" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	if len(sl.Waits()) != 1 {
		t.Errorf("waits = %v", sl.Waits())
	}

	srv.Add(llmtest.Reply{Delay: time.Minute})
	m, _ = newModel(t, llm.Config{BaseURL: srv.URL(), Timeout: 300 * time.Millisecond, MaxRetries: -1})
	_, err = m.Complete(t.Context(), userRequest("hi"))
	if want := "the model endpoint at " + srv.URL() + " did not answer within 300ms"; err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

func TestCompleteStopsWhenContextEnds(t *testing.T) {
	srv := llmtest.NewServer(t)
	hold := make(chan struct{}) // never released: the model "thinks" forever
	srv.Add(llmtest.Reply{Text: "never", Hold: hold})
	m, sl := newModel(t, llm.Config{BaseURL: srv.URL()})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := m.Complete(ctx, userRequest("hi"))
		errc <- err
	}()
	srv.Wait(1)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Complete did not return after cancel")
	}
	if len(sl.Waits()) != 0 || len(srv.Requests()) != 1 {
		t.Errorf("retried after cancel: waits %v, %d requests", sl.Waits(), len(srv.Requests()))
	}
}

// A cancel during the wait between attempts ends the wait.
func TestCompleteStopsWhenContextEndsDuringBackoff(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Fail(500, "boom"), llmtest.Text("never asked"))
	ctx, cancel := context.WithCancel(t.Context())
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL(), Sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}})
	_, err := m.Complete(ctx, userRequest("hi"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// The default sleep really waits, and stops early on cancel.
func TestCompleteDefaultSleepHonoursContext(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.Add(llmtest.Fail(503, "busy").WithHeader("Retry-After", "100"))
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := m.Complete(ctx, userRequest("hi"))
		errc <- err
	}()
	srv.Wait(1)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait between attempts ignored the cancel")
	}
}

func TestCompleteIsSafeForConcurrentUse(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.SetFallback(func(r llmtest.Request) llmtest.Reply { return llmtest.Text("echo: " + r.Last().Content) })
	m, _ := newModel(t, llm.Config{BaseURL: srv.URL()})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			text := fmt.Sprint("n", i)
			resp, err := m.Complete(t.Context(), userRequest(text))
			if err != nil || resp.Text != "echo: "+text {
				t.Errorf("Complete(%s) = %+v, %v", text, resp, err)
			}
		})
	}
	wg.Wait()
}

func BenchmarkComplete(b *testing.B) {
	srv := llmtest.NewServer(b)
	srv.SetFallback(func(llmtest.Request) llmtest.Reply {
		return llmtest.CallTool("web-fetch__fetch", `{"url":"https://example.com"}`)
	})
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	req := userRequest("fetch it")
	for range 20 {
		req.Messages = append(req.Messages,
			prompt.Message{Role: prompt.RoleAssistant, ToolCalls: []prompt.ToolCall{{ID: "c", Name: "web-fetch.fetch", Arguments: `{"url":"https://example.com"}`}}},
			prompt.Message{Role: prompt.RoleTool, ToolCallID: "c", Text: strings.Repeat("page text ", 100)},
			prompt.Message{Role: prompt.RoleUser, Text: "and again"},
		)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
