// Package llmtest is a strict fake of an OpenAI-compatible chat-completions
// endpoint, for tests of anything that talks to a model: the llm adapter
// here, and the real binary in end-to-end tests.
//
// A Server answers requests with a script of replies, in order, and records
// every request it receives, decoded. It refuses what the real API
// refuses (a malformed body, an unanswered tool call, a tool name with a
// dot) with an error in OpenAI's shape and fails the test too: the fake
// must never accept what production would not.
//
// A Server is safe for concurrent use. Each request takes the next reply of
// the script in the order the requests arrive; replies that are held back
// (Delay, Hold) do not hold back the requests behind them.
package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is a tool call in a scripted reply. Name is the name on the wire:
// Tollgate's "web-fetch.fetch" is "web-fetch__fetch" (see llm.WireName).
// An empty ID is filled in with a unique one.
type Call struct {
	ID        string
	Name      string
	Arguments string
}

// APIError is an error body in OpenAI's shape.
type APIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

// Reply is one scripted answer. The zero Reply is an empty assistant
// message.
type Reply struct {
	// Text and Calls make the assistant message of a 200 answer.
	Text  string
	Calls []Call
	// FinishReason defaults to "tool_calls" when there are calls, else "stop".
	FinishReason string
	// Status, when not 0 or 200, answers with this HTTP status and Error.
	Status int
	Error  APIError
	// Header is added to the answer (Retry-After, say).
	Header http.Header
	// Body, when set, is sent verbatim in place of a generated body.
	Body string
	// Delay holds the answer back; Hold holds it until closed. Either ends
	// early when the client goes away or the server closes.
	Delay time.Duration
	Hold  <-chan struct{}
	// Disconnect closes the connection without answering.
	Disconnect bool
}

// Text replies with an assistant message.
func Text(text string) Reply { return Reply{Text: text} }

// CallTool replies with one call to the tool named name on the wire, with
// arguments args (JSON text, sent as is, valid or not).
func CallTool(name, args string) Reply {
	return Reply{Calls: []Call{{Name: name, Arguments: args}}}
}

// CallTools replies with several tool calls.
func CallTools(calls ...Call) Reply { return Reply{Calls: calls} }

// Fail replies with an HTTP error status and an error body of the type the
// real API uses for it.
func Fail(status int, message string) Reply {
	typ := "invalid_request_error"
	var code any
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	return Reply{Status: status, Error: APIError{Message: message, Type: typ, Code: code}}
}

// WithHeader returns r with a header added to its answer.
func (r Reply) WithHeader(key, value string) Reply {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	r.Header = h
	return r
}

// Request is a request as the server received it.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// The decoded body; set as far as the body could be decoded.
	Model    string
	Messages []Message
	Tools    []Tool
	// Err says why the server refused the request; empty when it was
	// answered from the script.
	Err string
}

// Message is a chat message of a request. Content holds the text, whether
// it came as a string or as text parts.
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
}

// ToolCall is an assistant's tool call in a request's history.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Tool is a tool offered in a request.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Last returns the request's last message.
func (r Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// Server is the fake endpoint. Its methods are safe for concurrent use.
type Server struct {
	t    testing.TB
	srv  *httptest.Server
	done chan struct{} // closed when the test ends, to release held replies

	mu       sync.Mutex
	apiKey   string
	model    string
	script   []Reply
	fallback func(Request) Reply
	requests []Request
	arrived  chan struct{} // closed and replaced on every request
	ids      int
}

// NewServer starts a server that is closed when the test ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, done: make(chan struct{}), arrived: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// URL returns the base URL, ending in /v1, as LLM_BASE_URL takes it.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// RequireKey makes the server answer 401, as the real API does, to a
// request without "Authorization: Bearer key".
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// RequireModel makes the server answer 404 model_not_found, as the real
// API does, to a request for another model.
func (s *Server) RequireModel(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model = model
}

// Add appends replies to the script.
func (s *Server) Add(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// SetFallback answers valid requests with f once the script is used up.
// Without a fallback such a request fails the test and gets a 400.
func (s *Server) SetFallback(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// Requests returns every request received so far, refused ones included.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// WaitContext waits until n requests (counting from 1, refused ones
// included) have arrived and returns the nth.
func (s *Server) WaitContext(ctx context.Context, n int) (Request, error) {
	for {
		s.mu.Lock()
		if len(s.requests) >= n {
			r := s.requests[n-1]
			s.mu.Unlock()
			return r, nil
		}
		arrived, got := s.arrived, len(s.requests)
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return Request{}, fmt.Errorf("llmtest: waiting for request %d, got %d: %w", n, got, ctx.Err())
		}
	}
}

// Wait is WaitContext for at most 10 seconds; it fails the test on time
// out, so call it from the test's goroutine only.
func (s *Server) Wait(n int) Request {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.WaitContext(ctx, n)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// toolNameRE is the API's rule for function names.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// refusal is an error answer of the server's own.
type refusal struct {
	status int
	err    APIError
	// strict refusals are client bugs and fail the test; others (a wrong
	// key, a wrong model) are answers a test may ask for.
	strict bool
}

func invalid(param, format string, args ...any) *refusal {
	return &refusal{status: http.StatusBadRequest, strict: true, err: APIError{
		Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Param: param,
	}}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, readErr := readAll(r)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}

	s.mu.Lock()
	n := len(s.requests) + 1
	ref := s.check(r, body, readErr, &req)
	var reply Reply
	if ref == nil {
		switch {
		case len(s.script) > 0:
			reply, s.script = s.script[0], s.script[1:]
		case s.fallback != nil:
			f := s.fallback
			s.mu.Unlock()
			reply = f(req)
			s.mu.Lock()
		default:
			ref = invalid("", "llmtest: no reply scripted for request %d", n)
		}
	}
	if ref != nil {
		req.Err = ref.err.Message
	} else {
		reply = s.fillIDs(reply)
		s.noteUnknownTools(n, reply, req.Tools)
	}
	s.requests = append(s.requests, req)
	close(s.arrived)
	s.arrived = make(chan struct{})
	s.mu.Unlock()

	if ref != nil {
		if ref.strict {
			s.t.Errorf("llmtest: request %d refused: %s", n, ref.err.Message)
		}
		writeJSON(w, ref.status, map[string]any{"error": ref.err})
		return
	}
	s.answer(w, r, req, reply, n)
}

func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

func (s *Server) fillIDs(reply Reply) Reply {
	reply.Calls = slices.Clone(reply.Calls)
	for i := range reply.Calls {
		if reply.Calls[i].ID == "" {
			s.ids++
			reply.Calls[i].ID = fmt.Sprintf("call_llmtest_%d", s.ids)
		}
	}
	return reply
}

// noteUnknownTools logs, without failing, a scripted call to a tool the
// request did not offer: usually a test that forgot the wire name, but
// models do invent tools, so a test may mean it.
func (s *Server) noteUnknownTools(n int, reply Reply, tools []Tool) {
	for _, c := range reply.Calls {
		if !slices.ContainsFunc(tools, func(t Tool) bool { return t.Name == c.Name }) {
			names := make([]string, len(tools))
			for i, t := range tools {
				names[i] = t.Name
			}
			s.t.Logf("llmtest: request %d: scripted call to %q, a tool not offered (offered: %v)", n, c.Name, names)
		}
	}
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, req Request, reply Reply, n int) {
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	if reply.Hold != nil {
		select {
		case <-reply.Hold:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	if reply.Disconnect {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // closes the connection all the same
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	if reply.Body != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(reply.Body))
		return
	}
	if status != http.StatusOK {
		writeJSON(w, status, map[string]any{"error": reply.Error})
		return
	}
	writeJSON(w, status, completion(req, reply, n))
}

func completion(req Request, reply Reply, n int) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if reply.Text != "" || len(reply.Calls) == 0 {
		msg["content"] = reply.Text
	}
	finish := "stop"
	if len(reply.Calls) > 0 {
		calls := make([]map[string]any, len(reply.Calls))
		for i, c := range reply.Calls {
			calls[i] = map[string]any{
				"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments},
			}
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	if reply.FinishReason != "" {
		finish = reply.FinishReason
	}
	promptTokens := len(req.Body)/4 + 1
	completionTokens := (len(reply.Text)+len(fmt.Sprint(reply.Calls)))/4 + 1
	return map[string]any{
		"id":      fmt.Sprintf("chatcmpl-llmtest-%d", n),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   req.Model,
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish,
		}},
		"usage": map[string]any{
			"prompt_tokens": promptTokens, "completion_tokens": completionTokens,
			"total_tokens": promptTokens + completionTokens,
		},
		"system_fingerprint": "llmtest",
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// check validates a request like the real API and decodes it into req.
// Called with s.mu held.
func (s *Server) check(r *http.Request, body []byte, readErr error, req *Request) *refusal {
	if r.URL.Path != "/v1/chat/completions" {
		return &refusal{status: http.StatusNotFound, strict: true, err: APIError{
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), Type: "invalid_request_error",
		}}
	}
	if r.Method != http.MethodPost {
		return &refusal{status: http.StatusMethodNotAllowed, strict: true, err: APIError{
			Message: fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path), Type: "invalid_request_error",
		}}
	}
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		msg := "You didn't provide an API key."
		if r.Header.Get("Authorization") != "" {
			msg = "Incorrect API key provided."
		}
		return &refusal{status: http.StatusUnauthorized, err: APIError{
			Message: msg, Type: "invalid_request_error", Code: "invalid_api_key",
		}}
	}
	if readErr != nil {
		return invalid("", "could not read the body: %v", readErr)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return invalid("", "Content-Type is %q, want application/json", r.Header.Get("Content-Type"))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return invalid("", "We could not parse the JSON body of your request: %v", err)
	}
	for k := range raw {
		if !knownParams[k] {
			return invalid(k, "Unrecognized request argument supplied: %s", k)
		}
	}
	if err := decodeField(raw, "model", &req.Model); err != nil || req.Model == "" {
		return invalid("model", "you must provide a model parameter")
	}
	var stream bool
	if err := decodeField(raw, "stream", &stream); err != nil {
		return invalid("stream", "stream must be a boolean")
	}
	if stream {
		return invalid("stream", "llmtest does not stream: send stream false")
	}
	if ref := decodeTools(raw["tools"], req); ref != nil {
		return ref
	}
	if _, ok := raw["tool_choice"]; ok && len(req.Tools) == 0 {
		return invalid("tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
	}
	if ref := decodeMessages(raw["messages"], req); ref != nil {
		return ref
	}
	if s.model != "" && req.Model != s.model {
		return &refusal{status: http.StatusNotFound, err: APIError{
			Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", req.Model),
			Type:    "invalid_request_error", Code: "model_not_found",
		}}
	}
	return nil
}

var knownParams = map[string]bool{
	"model": true, "messages": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"stream": true, "stream_options": true, "temperature": true, "top_p": true, "n": true, "stop": true,
	"max_tokens": true, "max_completion_tokens": true, "presence_penalty": true, "frequency_penalty": true,
	"logit_bias": true, "logprobs": true, "top_logprobs": true, "user": true, "seed": true,
	"response_format": true, "reasoning_effort": true, "metadata": true, "store": true, "service_tier": true,
}

func decodeField(raw map[string]json.RawMessage, key string, v any) error {
	b, ok := raw[key]
	if !ok {
		return nil
	}
	return json.Unmarshal(b, v)
}

func decodeTools(b json.RawMessage, req *Request) *refusal {
	if b == nil || string(b) == "null" {
		return nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		} `json:"function"`
	}
	if err := strictUnmarshal(b, &tools); err != nil {
		return invalid("tools", "Invalid 'tools': %v", err)
	}
	seen := map[string]bool{}
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return invalid(param+".type", "Invalid value: '%s'. Supported values are: 'function'.", t.Type)
		}
		if t.Function == nil {
			return invalid(param+".function", "Missing required parameter: '%s.function'.", param)
		}
		f := t.Function
		if !toolNameRE.MatchString(f.Name) {
			return invalid(param+".function.name", "Invalid '%s.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$' (at most 64 characters), got %q.", param, f.Name)
		}
		if seen[f.Name] {
			return invalid(param+".function.name", "Duplicate function name %q in 'tools'.", f.Name)
		}
		seen[f.Name] = true
		if f.Parameters != nil {
			var obj map[string]any
			if err := json.Unmarshal(f.Parameters, &obj); err != nil || obj == nil {
				return invalid(param+".function.parameters", "Invalid schema for function '%s': parameters must be a JSON object.", f.Name)
			}
		}
		req.Tools = append(req.Tools, Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters})
	}
	return nil
}

type wireMessage struct {
	Role       *string         `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	Refusal    *string         `json:"refusal"`
	ToolCallID *string         `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string  `json:"name"`
			Arguments *string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func decodeMessages(b json.RawMessage, req *Request) *refusal {
	if b == nil {
		return invalid("messages", "Missing required parameter: 'messages'.")
	}
	var msgs []wireMessage
	if err := strictUnmarshal(b, &msgs); err != nil {
		return invalid("messages", "Invalid 'messages': %v", err)
	}
	if len(msgs) == 0 {
		return invalid("messages", "Invalid 'messages': empty array. Expected an array with minimum length 1.")
	}
	// open holds the tool calls of the last assistant message that still
	// wait for their tool message.
	var open []string
	unanswered := func(i int) *refusal {
		return invalid(fmt.Sprintf("messages.[%d].role", i), "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(open, ", "))
	}
	for i, wm := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		if wm.Role == nil {
			return invalid(param+".role", "Missing required parameter: '%s.role'.", param)
		}
		role := *wm.Role
		text, hasContent, err := content(wm.Content, role)
		if err != nil {
			return invalid(param+".content", "Invalid '%s.content': %v", param, err)
		}
		m := Message{Role: role, Content: text}
		if len(wm.ToolCalls) > 0 && role != "assistant" {
			return invalid(param+".tool_calls", "Invalid parameter: 'tool_calls' is only allowed on messages with role 'assistant'.")
		}
		if wm.ToolCallID != nil && role != "tool" {
			return invalid(param+".tool_call_id", "Invalid parameter: 'tool_call_id' is only allowed on messages with role 'tool'.")
		}
		switch role {
		case "system", "developer", "user":
			if len(open) > 0 {
				return unanswered(i)
			}
			if !hasContent {
				return invalid(param+".content", "Missing required parameter: '%s.content'.", param)
			}
		case "assistant":
			if len(open) > 0 {
				return unanswered(i)
			}
			if !hasContent && len(wm.ToolCalls) == 0 {
				return invalid(param+".content", "Invalid '%s': an assistant message must have 'content' or 'tool_calls'.", param)
			}
			for j, tc := range wm.ToolCalls {
				tp := fmt.Sprintf("%s.tool_calls[%d]", param, j)
				switch {
				case tc.ID == "":
					return invalid(tp+".id", "Missing required parameter: '%s.id'.", tp)
				case tc.Type != "function":
					return invalid(tp+".type", "Invalid value: '%s'. Supported values are: 'function'.", tc.Type)
				case tc.Function == nil:
					return invalid(tp+".function", "Missing required parameter: '%s.function'.", tp)
				case !toolNameRE.MatchString(tc.Function.Name):
					return invalid(tp+".function.name", "Invalid '%s.function.name': string does not match pattern '^[a-zA-Z0-9_-]{1,64}$', got %q.", tp, tc.Function.Name)
				case tc.Function.Arguments == nil:
					return invalid(tp+".function.arguments", "Missing required parameter: '%s.function.arguments'.", tp)
				case slices.Contains(open, tc.ID):
					return invalid(tp+".id", "Duplicate tool call id %q.", tc.ID)
				}
				open = append(open, tc.ID)
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: *tc.Function.Arguments})
			}
		case "tool":
			if wm.ToolCallID == nil || *wm.ToolCallID == "" {
				return invalid(param+".tool_call_id", "Missing required parameter: '%s.tool_call_id'.", param)
			}
			id := *wm.ToolCallID
			k := slices.Index(open, id)
			if k < 0 {
				return invalid(param+".role", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (no open call %q).", id)
			}
			open = slices.Delete(open, k, k+1)
			if !hasContent {
				return invalid(param+".content", "Missing required parameter: '%s.content'.", param)
			}
			m.ToolCallID = id
		default:
			return invalid(param+".role", "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'.", role)
		}
		req.Messages = append(req.Messages, m)
	}
	if len(open) > 0 {
		return unanswered(len(msgs))
	}
	return nil
}

// content reads a message's content: a string, null, or an array of parts.
// has is false when there is none.
func content(b json.RawMessage, role string) (text string, has bool, err error) {
	if b == nil || string(b) == "null" {
		return "", false, nil
	}
	if err := json.Unmarshal(b, &text); err == nil {
		return text, true, nil
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return "", false, fmt.Errorf("expected a string or an array of content parts")
	}
	var sb strings.Builder
	for i, p := range parts {
		switch {
		case p.Type == "text" && p.Text != nil:
			sb.WriteString(*p.Text)
		case p.Type == "image_url" && role == "user" && p.ImageURL != nil:
		default:
			return "", false, fmt.Errorf("part %d of type %q is not valid for role %q", i, p.Type, role)
		}
	}
	return sb.String(), true, nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
