package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"tollgate/prompt"
)

// DefaultBaseURL is OpenAI's endpoint.
const DefaultBaseURL = "https://api.openai.com/v1"

// Defaults for Config.
const (
	// DefaultTimeout is generous because a long answer from a slow or
	// local model takes minutes; it is also what LLM_TIMEOUT has always
	// defaulted to, so deployments that leave it unset keep their limit.
	DefaultTimeout    = 120 * time.Second
	DefaultMaxRetries = 3
)

const (
	// firstBackoff doubles with every retry up to maxBackoff.
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
	// maxRetryAfter is the longest wait we accept from Retry-After: a user
	// waiting in a chat is better told to try later than left hanging.
	maxRetryAfter = 2 * time.Minute
)

// Config configures a Model.
type Config struct {
	// BaseURL is the API root, ending in /v1 for most servers
	// (default DefaultBaseURL).
	BaseURL string
	// APIKey is sent as a bearer token when set; local servers need none.
	APIKey string
	// Model is the model name, as the endpoint knows it. Required.
	Model string
	// Timeout bounds each attempt, reading the answer included
	// (default DefaultTimeout).
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is retried
	// (default DefaultMaxRetries; negative: never).
	MaxRetries int
	// HTTPClient sends the requests (default: a client of its own).
	HTTPClient *http.Client
	Logger     *slog.Logger // default: discard
	// Sleep waits between attempts; it returns early with ctx's error when
	// ctx ends (default: a timer). Tests replace it to skip the waits.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now reads the clock for Retry-After dates (default time.Now).
	Now func() time.Time
}

// Model is a prompt.Model on an OpenAI-compatible chat-completions
// endpoint. It is safe for concurrent use.
type Model struct {
	base       openai.ClientConfig
	baseURL    string
	model      string
	timeout    time.Duration
	maxRetries int
	http       *http.Client
	log        *slog.Logger
	sleep      func(context.Context, time.Duration) error
	now        func() time.Time
}

var _ prompt.Model = (*Model)(nil)

// New checks cfg and returns a Model. It sends nothing.
func New(cfg Config) (*Model, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if err := checkBaseURL(cfg.BaseURL); err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("model name is empty")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("timeout %s is negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	base := openai.DefaultConfig(cfg.APIKey)
	base.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	return &Model{
		base:       base,
		baseURL:    base.BaseURL,
		model:      cfg.Model,
		timeout:    cfg.Timeout,
		maxRetries: cfg.MaxRetries,
		http:       cfg.HTTPClient,
		log:        cfg.Logger,
		sleep:      cfg.Sleep,
		now:        cfg.Now,
	}, nil
}

func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("base URL %q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("base URL %q must start with http:// or https://", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("base URL %q has no host", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("base URL %q must not have a query or fragment", raw)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Complete implements prompt.Model. It returns an *Error when the
// endpoint fails, ctx's error (wrapped) when ctx ends first, and a plain
// error for a request it cannot express, such as a tool name longer than
// 64 characters once encoded (check names at start-up with WireName).
func (m *Model) Complete(ctx context.Context, req prompt.Request) (prompt.Response, error) {
	creq, err := m.request(req)
	if err != nil {
		return prompt.Response{}, err
	}
	for attempt := 1; ; attempt++ {
		start := time.Now()
		resp, f := m.attempt(ctx, creq)
		if f == nil {
			m.log.Debug("model turn", "model", m.model, "attempt", attempt, "took", time.Since(start),
				"prompt_tokens", resp.Usage.PromptTokens, "completion_tokens", resp.Usage.CompletionTokens)
			return m.response(resp, attempt)
		}
		if ctx.Err() != nil {
			return prompt.Response{}, fmt.Errorf("model request: %w", context.Cause(ctx))
		}
		f.err.Attempts = attempt
		if !f.retry || attempt > m.maxRetries {
			return prompt.Response{}, f.err
		}
		delay := backoff(attempt)
		if f.retryAfter > 0 {
			delay = f.retryAfter
		}
		if delay > maxRetryAfter {
			f.err.Msg += fmt.Sprintf("; it asks to wait %s: try again later", f.retryAfter)
			return prompt.Response{}, f.err
		}
		m.log.Warn("model request failed, retrying", "model", m.model, "attempt", attempt,
			"status", f.err.StatusCode, "err", f.err.Err, "delay", delay)
		if err := m.sleep(ctx, delay); err != nil {
			return prompt.Response{}, fmt.Errorf("model request: %w", err)
		}
	}
}

func backoff(attempt int) time.Duration {
	d := firstBackoff
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// failure is one failed attempt.
type failure struct {
	err        *Error
	retry      bool
	retryAfter time.Duration
}

// answer is what the HTTP layer saw of one attempt, which go-openai does
// not report (its errors drop the response headers).
type answer struct {
	sent       bool
	status     int
	retryAfter string
}

type recorder struct {
	c *http.Client
	a *answer
}

func (r recorder) Do(req *http.Request) (*http.Response, error) {
	r.a.sent = true
	resp, err := r.c.Do(req)
	if resp != nil {
		r.a.status = resp.StatusCode
		r.a.retryAfter = resp.Header.Get("Retry-After")
	}
	return resp, err
}

func (m *Model) attempt(ctx context.Context, creq openai.ChatCompletionRequest) (openai.ChatCompletionResponse, *failure) {
	actx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var a answer
	cfg := m.base
	// A client per attempt is a struct copy; it lets the recorder see this
	// attempt's answer without sharing state between concurrent calls.
	cfg.HTTPClient = recorder{c: m.http, a: &a}
	resp, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(actx, creq)
	if err == nil {
		return resp, nil
	}
	return resp, m.classify(actx, err, a)
}

func (m *Model) classify(actx context.Context, err error, a answer) *failure {
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case !a.sent:
		// go-openai refused before sending (its checks of known model
		// names, or encoding): no retry helps, and "could not reach"
		// would mislead.
		return &failure{err: &Error{Err: err,
			Msg: fmt.Sprintf("could not ask model %q: %v: check LLM_MODEL", m.model, err)}}
	case errors.As(err, &apiErr):
		return m.statusFailure(apiErr.HTTPStatusCode, apiErr.Message, apiErr.Code, a, err)
	case errors.As(err, &reqErr):
		return m.statusFailure(reqErr.HTTPStatusCode, bodySnippet(reqErr.Body), nil, a, err)
	case errors.Is(actx.Err(), context.DeadlineExceeded):
		return &failure{retry: true, err: &Error{StatusCode: a.status, Err: err,
			Msg: fmt.Sprintf("the model endpoint at %s did not answer within %s", m.baseURL, m.timeout)}}
	case a.status != 0 && isDecodeError(err):
		return &failure{err: &Error{StatusCode: a.status, Err: err,
			Msg: fmt.Sprintf("the model endpoint at %s sent an answer that is not a chat completion (%v): check LLM_BASE_URL", m.baseURL, err)}}
	default:
		return &failure{retry: true, err: &Error{StatusCode: a.status, Err: err,
			Msg: fmt.Sprintf("could not reach the model endpoint at %s: %v", m.baseURL, netCause(err))}}
	}
}

func isDecodeError(err error) bool {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, io.EOF)
}

// netCause drops the method and URL a *url.Error repeats.
func netCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (m *Model) statusFailure(status int, detail string, code any, a answer, err error) *failure {
	f := &failure{err: &Error{StatusCode: status, Err: err}}
	codeStr, _ := code.(string)
	switch {
	case status == http.StatusUnauthorized:
		f.err.Msg = "the model endpoint answered 401: check LLM_API_KEY"
	case status == http.StatusForbidden:
		f.err.Msg = fmt.Sprintf("the model endpoint answered 403: check that LLM_API_KEY may use model %q", m.model)
	case status == http.StatusNotFound:
		f.err.Msg = fmt.Sprintf("the model endpoint answered 404: check LLM_MODEL (%q) and LLM_BASE_URL (%s)", m.model, m.baseURL)
	case status == http.StatusTooManyRequests && codeStr == "insufficient_quota":
		f.err.Msg = "the model endpoint answered 429 (insufficient_quota): check the plan and billing of the account behind LLM_API_KEY"
	case status == http.StatusBadRequest && codeStr == "context_length_exceeded":
		f.err.Msg = fmt.Sprintf("the conversation is too long for model %q", m.model)
	case status == http.StatusTooManyRequests:
		f.err.Msg = "the model endpoint is rate limiting requests (429)"
		f.retry = true
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		f.err.Msg = fmt.Sprintf("the model endpoint answered %d", status)
		f.retry = true
	default:
		f.err.Msg = fmt.Sprintf("the model endpoint answered %d", status)
	}
	// The endpoint's own words help, except after a 401, where they may
	// quote part of the key into a chat.
	if detail != "" && status != http.StatusUnauthorized {
		f.err.Msg += ": " + detail
	}
	if f.retry {
		f.retryAfter = parseRetryAfter(a.retryAfter, m.now())
	}
	return f
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 means none.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		// Capped so the product cannot overflow; anything this long is
		// refused as too long a wait anyway.
		return time.Duration(min(secs, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// bodySnippet makes an error body that is not OpenAI's JSON (an HTML page
// from a proxy, say) short enough to show.
func bodySnippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// Error is a failed model request. Its message says what a user can check;
// Err keeps the cause for the logs.
type Error struct {
	// StatusCode is the endpoint's HTTP status, 0 when none arrived.
	StatusCode int
	// Attempts is how many requests were sent.
	Attempts int
	Msg      string
	Err      error
}

func (e *Error) Error() string {
	if e.Attempts > 1 {
		return fmt.Sprintf("%s (after %d attempts)", e.Msg, e.Attempts)
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }
