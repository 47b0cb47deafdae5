package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// recTB records Errorf instead of failing, to test strict mode.
type recTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, format)
}

func (r *recTB) Errors() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs)
}

func post(t *testing.T, url, body string, header ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, b)
	}
	return resp.StatusCode, resp.Header, v
}

const simple = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`

const withTools = `{"model":"m","stream":false,
	"messages":[{"role":"system","content":"sys"},{"role":"user","content":"fetch"}],
	"tools":[{"type":"function","function":{"name":"web-fetch__fetch","description":"d",
		"parameters":{"type":"object","properties":{"url":{"type":"string"}}}}}]}`

func TestReplyHasTheRealShape(t *testing.T) {
	s := NewServer(t)
	s.Add(CallTool("web-fetch__fetch", `{"url":"https://example.com"}`), Text("hello"))
	status, _, v := post(t, s.URL()+"/chat/completions", withTools)
	if status != 200 {
		t.Fatalf("status %d: %v", status, v)
	}
	if v["object"] != "chat.completion" || v["model"] != "m" || !strings.HasPrefix(v["id"].(string), "chatcmpl-") {
		t.Errorf("envelope = %v", v)
	}
	if _, ok := v["created"].(float64); !ok {
		t.Errorf("created = %v", v["created"])
	}
	u := v["usage"].(map[string]any)
	if u["total_tokens"].(float64) != u["prompt_tokens"].(float64)+u["completion_tokens"].(float64) {
		t.Errorf("usage = %v", u)
	}
	choice := v["choices"].([]any)[0].(map[string]any)
	if choice["index"].(float64) != 0 || choice["finish_reason"] != "tool_calls" {
		t.Errorf("choice = %v", choice)
	}
	msg := choice["message"].(map[string]any)
	if msg["role"] != "assistant" || msg["content"] != nil {
		t.Errorf("message = %v, want null content beside tool calls", msg)
	}
	call := msg["tool_calls"].([]any)[0].(map[string]any)
	fn := call["function"].(map[string]any)
	if call["type"] != "function" || call["id"] == "" || fn["name"] != "web-fetch__fetch" || fn["arguments"] != `{"url":"https://example.com"}` {
		t.Errorf("tool call = %v", call)
	}

	_, _, v = post(t, s.URL()+"/chat/completions", simple)
	choice = v["choices"].([]any)[0].(map[string]any)
	if choice["finish_reason"] != "stop" || choice["message"].(map[string]any)["content"] != "hello" {
		t.Errorf("text choice = %v", choice)
	}
	if _, ok := choice["message"].(map[string]any)["tool_calls"]; ok {
		t.Errorf("tool_calls present in a text reply: %v", choice)
	}
}

func TestRecordsDecodedRequests(t *testing.T) {
	s := NewServer(t)
	s.Add(CallTools(Call{Name: "a"}, Call{Name: "b"}), Text("ok"))
	post(t, s.URL()+"/chat/completions", withTools)
	r := s.Wait(1)
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Model != "m" || r.Err != "" {
		t.Errorf("request = %+v", r)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Last().Content != "fetch" {
		t.Errorf("messages = %+v", r.Messages)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "web-fetch__fetch" || r.Tools[0].Description != "d" ||
		!json.Valid(r.Tools[0].Parameters) {
		t.Errorf("tools = %+v", r.Tools)
	}

	// The history of the reply above, answered: IDs are unique and kept.
	post(t, s.URL()+"/chat/completions", simple) // consumes "ok"
	history := `{"model":"m","messages":[
		{"role":"user","content":[{"type":"text","text":"part one, "},{"type":"text","text":"part two"}]},
		{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_llmtest_1","type":"function","function":{"name":"a","arguments":"{}"}},
			{"id":"call_llmtest_2","type":"function","function":{"name":"b","arguments":"{bad json"}}]},
		{"role":"tool","tool_call_id":"call_llmtest_2","content":"B"},
		{"role":"tool","tool_call_id":"call_llmtest_1","content":"A"},
		{"role":"assistant","content":"done"},
		{"role":"user","content":"next"}]}`
	s.Add(Text("fine"))
	if status, _, v := post(t, s.URL()+"/chat/completions", history); status != 200 {
		t.Fatalf("valid history refused: %v", v)
	}
	r = s.Wait(3)
	if r.Messages[0].Content != "part one, part two" {
		t.Errorf("text parts = %q", r.Messages[0].Content)
	}
	if c := r.Messages[1].ToolCalls; len(c) != 2 || c[1].Arguments != "{bad json" {
		t.Errorf("tool calls = %+v", c)
	}
	if m := r.Messages[3]; m.Role != "tool" || m.ToolCallID != "call_llmtest_1" || m.Content != "A" {
		t.Errorf("tool result = %+v", m)
	}
}

func TestRefusesWhatTheRealAPIRefuses(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	call := func(id, name string) string {
		return `{"role":"assistant","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":"{}"}}]}`
	}
	tool := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"r"}` }
	msgs := func(m ...string) string { return `{"model":"m","messages":[` + strings.Join(m, ",") + `]}` }
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not JSON", `{"model":`, "could not parse the JSON body"},
		{"no model", `{"messages":[` + user + `]}`, "must provide a model"},
		{"model not a string", `{"model":1,"messages":[` + user + `]}`, "must provide a model"},
		{"no messages", `{"model":"m"}`, "Missing required parameter: 'messages'"},
		{"empty messages", `{"model":"m","messages":[]}`, "empty array"},
		{"unknown parameter", `{"model":"m","messages":[` + user + `],"temprature":1}`, "Unrecognized request argument supplied: temprature"},
		{"stream", `{"model":"m","stream":true,"messages":[` + user + `]}`, "does not stream"},
		{"bad role", msgs(`{"role":"robot","content":"x"}`), "Invalid value: 'robot'"},
		{"no role", msgs(`{"content":"x"}`), "'messages[0].role'"},
		{"null user content", msgs(`{"role":"user","content":null}`), "'messages[0].content'"},
		{"bad content type", msgs(`{"role":"user","content":42}`), "string or an array"},
		{"image in system", msgs(`{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]}`), "not valid for role"},
		{"unknown message field", msgs(`{"role":"user","content":"x","colour":"red"}`), "unknown field"},
		{"empty assistant", msgs(user, `{"role":"assistant"}`), "must have 'content' or 'tool_calls'"},
		{"call unanswered before user", msgs(user, call("c1", "t"), user), "did not have response messages: c1"},
		{"call unanswered at end", msgs(user, call("c1", "t")), "did not have response messages: c1"},
		{"call unanswered before assistant", msgs(user, call("c1", "t"), `{"role":"assistant","content":"x"}`), "c1"},
		{"one of two unanswered", msgs(user, `{"role":"assistant","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"t","arguments":"{}"}},
			{"id":"c2","type":"function","function":{"name":"t","arguments":"{}"}}]}`, tool("c2"), user), "response messages: c1"},
		{"tool without call", msgs(user, tool("c1")), "must be a response to a preceeding message with 'tool_calls'"},
		{"tool answers twice", msgs(user, call("c1", "t"), tool("c1"), tool("c1")), "no open call \"c1\""},
		{"tool without ID", msgs(user, call("c1", "t"), `{"role":"tool","content":"r"}`), "tool_call_id"},
		{"tool without content", msgs(user, call("c1", "t"), `{"role":"tool","tool_call_id":"c1"}`), "content"},
		{"tool_calls on user", msgs(`{"role":"user","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":""}}]}`), "only allowed on messages with role 'assistant'"},
		{"tool_call_id on user", msgs(`{"role":"user","content":"x","tool_call_id":"c"}`), "only allowed on messages with role 'tool'"},
		{"dot in called name", msgs(user, call("c1", "web-fetch.fetch"), tool("c1")), "does not match pattern"},
		{"call without ID", msgs(user, call("", "t")), "'messages[1].tool_calls[0].id'"},
		{"call not a function", msgs(user, `{"role":"assistant","tool_calls":[{"id":"c","type":"code","function":{"name":"t","arguments":""}}]}`), "Invalid value: 'code'"},
		{"call without arguments", msgs(user, `{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"t"}}]}`), "arguments"},
		{"dot in tool name", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"web-fetch.fetch"}}]}`, "does not match pattern"},
		{"tool name too long", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"` + strings.Repeat("a", 65) + `"}}]}`, "does not match pattern"},
		{"duplicate tool", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"t"}},{"type":"function","function":{"name":"t"}}]}`, "Duplicate function name"},
		{"tool not a function", `{"model":"m","messages":[` + user + `],"tools":[{"type":"retrieval","function":{"name":"t"}}]}`, "Supported values are: 'function'"},
		{"tool without function", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function"}]}`, "tools[0].function"},
		{"parameters an array", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"t","parameters":[1]}}]}`, "must be a JSON object"},
		{"parameters a string", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"t","parameters":"{}"}}]}`, "must be a JSON object"},
		{"parameters null", `{"model":"m","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"t","parameters":null}}]}`, "must be a JSON object"},
		{"tool_choice without tools", `{"model":"m","messages":[` + user + `],"tool_choice":"auto"}`, "only allowed when 'tools' are specified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recTB{TB: t}
			s := NewServer(rec)
			s.Add(Text("must not be used"))
			status, _, v := post(t, s.URL()+"/chat/completions", tc.body)
			if status != 400 {
				t.Fatalf("status %d, want 400: %v", status, v)
			}
			e, _ := v["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if !strings.Contains(msg, tc.want) || e["type"] != "invalid_request_error" {
				t.Errorf("error = %v, want a message containing %q", v, tc.want)
			}
			for _, k := range []string{"param", "code"} {
				if _, ok := e[k]; !ok {
					t.Errorf("error has no %q: %v", k, e)
				}
			}
			if r := s.Wait(1); r.Err != msg {
				t.Errorf("recorded Err = %q, want %q", r.Err, msg)
			}
			if rec.Errors() != 1 {
				t.Errorf("strict server reported %d test errors, want 1", rec.Errors())
			}
			// The refused request did not consume the script.
			if status, _, _ := post(t, s.URL()+"/chat/completions", simple); status != 200 {
				t.Errorf("next valid request got %d", status)
			}
		})
	}
}

func TestRefusesWrongPathAndMethodAndContentType(t *testing.T) {
	rec := &recTB{TB: t}
	s := NewServer(rec)
	if status, _, v := post(t, s.URL()+"/completions", simple); status != 404 || !strings.Contains(v["error"].(map[string]any)["message"].(string), "Invalid URL (POST /v1/completions)") {
		t.Errorf("wrong path: %d %v", status, v)
	}
	resp, err := http.Get(s.URL() + "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	if status, _, _ := post(t, s.URL()+"/chat/completions", simple, "Content-Type", "text/plain"); status != 400 {
		t.Errorf("text/plain: %d", status)
	}
	if rec.Errors() != 3 || len(s.Requests()) != 3 {
		t.Errorf("%d test errors, %d requests; want 3, 3", rec.Errors(), len(s.Requests()))
	}
}

// A wrong key or model is an answer a test may want: it does not fail the
// test.
func TestKeyAndModelChecks(t *testing.T) {
	rec := &recTB{TB: t}
	s := NewServer(rec)
	s.RequireKey("sk-1")
	s.RequireModel("m")
	s.Add(Text("ok"))
	for _, tc := range []struct {
		header []string
		body   string
		status int
		want   string
	}{
		{nil, simple, 401, "You didn't provide an API key."},
		{[]string{"Authorization", "Bearer sk-2"}, simple, 401, "Incorrect API key provided."},
		{[]string{"Authorization", "Bearer sk-1"}, `{"model":"gpt-x","messages":[{"role":"user","content":"x"}]}`, 404, "The model `gpt-x` does not exist"},
		{[]string{"Authorization", "Bearer sk-1"}, simple, 200, ""},
	} {
		status, _, v := post(t, s.URL()+"/chat/completions", tc.body, tc.header...)
		if status != tc.status {
			t.Errorf("%v: status %d, want %d: %v", tc.header, status, tc.status, v)
			continue
		}
		if tc.want != "" && !strings.Contains(v["error"].(map[string]any)["message"].(string), tc.want) {
			t.Errorf("%v: %v, want %q", tc.header, v, tc.want)
		}
	}
	if rec.Errors() != 0 {
		t.Errorf("%d test errors", rec.Errors())
	}
}

func TestScriptedErrorsHeadersAndBodies(t *testing.T) {
	s := NewServer(t)
	s.Add(
		Fail(429, "Rate limit reached").WithHeader("Retry-After", "3"),
		Fail(500, "boom"),
		Reply{Status: 502, Body: "<html>bad gateway</html>"},
	)
	status, h, v := post(t, s.URL()+"/chat/completions", simple)
	e := v["error"].(map[string]any)
	if status != 429 || h.Get("Retry-After") != "3" || e["message"] != "Rate limit reached" || e["code"] != "rate_limit_exceeded" {
		t.Errorf("429: %d %v %v", status, h, v)
	}
	if status, _, v := post(t, s.URL()+"/chat/completions", simple); status != 500 || v["error"].(map[string]any)["type"] != "server_error" {
		t.Errorf("500: %d %v", status, v)
	}
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(simple))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || string(b) != "<html>bad gateway</html>" {
		t.Errorf("verbatim body: %d %q", resp.StatusCode, b)
	}
}

func TestScriptUsedUpFailsUnlessFallback(t *testing.T) {
	rec := &recTB{TB: t}
	s := NewServer(rec)
	if status, _, v := post(t, s.URL()+"/chat/completions", simple); status != 400 || !strings.Contains(v["error"].(map[string]any)["message"].(string), "no reply scripted for request 1") {
		t.Errorf("%d %v", status, v)
	}
	if rec.Errors() != 1 {
		t.Errorf("%d test errors, want 1", rec.Errors())
	}
	s.SetFallback(func(r Request) Reply { return Text("echo " + r.Last().Content) })
	_, _, v := post(t, s.URL()+"/chat/completions", simple)
	if got := v["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; got != "echo hi" {
		t.Errorf("fallback answered %v", got)
	}
}

func TestHoldDelayAndDisconnect(t *testing.T) {
	s := NewServer(t)
	hold := make(chan struct{})
	s.Add(Reply{Text: "held", Hold: hold}, Reply{Text: "late", Delay: 50 * time.Millisecond}, Reply{Disconnect: true})
	done := make(chan string, 1)
	go func() {
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(simple))
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	s.Wait(1)
	select {
	case got := <-done:
		t.Fatalf("answered before release: %s", got)
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	if got := <-done; !strings.Contains(got, `"held"`) {
		t.Errorf("released answer = %s", got)
	}
	start := time.Now()
	post(t, s.URL()+"/chat/completions", simple)
	if time.Since(start) < 50*time.Millisecond {
		t.Error("Delay did not hold the answer back")
	}
	_, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(simple))
	if err == nil {
		t.Error("Disconnect answered")
	}
}

func TestWaitContextTimesOut(t *testing.T) {
	s := NewServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := s.WaitContext(ctx, 1)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for request 1, got 0") {
		t.Errorf("err = %v", err)
	}
}

// A held reply must not keep the test from ending: cleanup releases it.
func TestCleanupReleasesHeldReplies(t *testing.T) {
	var s *Server
	t.Run("inner", func(t *testing.T) {
		s = NewServer(t)
		s.Add(Reply{Hold: make(chan struct{})})
		go func() {
			resp, err := http.Post(s.URL()+"/chat/completions", "application/json", bytes.NewReader([]byte(simple)))
			if err == nil {
				resp.Body.Close()
			}
		}()
		s.Wait(1)
	})
	// Reaching here means the inner test's cleanup did not hang.
	if len(s.Requests()) != 1 {
		t.Errorf("%d requests", len(s.Requests()))
	}
}
