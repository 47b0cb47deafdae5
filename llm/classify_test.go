package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// An error raised before anything was sent is not a network error: it is
// neither retried nor reported as an unreachable endpoint.
func TestClassifyErrorBeforeSending(t *testing.T) {
	m, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", Model: "o1-mini"})
	if err != nil {
		t.Fatal(err)
	}
	f := m.classify(context.Background(), errors.New("this model is not supported"), answer{})
	if f.retry {
		t.Error("retried")
	}
	if got := f.err.Error(); got != `could not ask model "o1-mini": this model is not supported: check LLM_MODEL` {
		t.Errorf("message = %q", got)
	}
	f = m.classify(context.Background(), errors.New("connection reset"), answer{sent: true})
	if !f.retry || !strings.HasPrefix(f.err.Error(), "could not reach the model endpoint at http://127.0.0.1:1/v1") {
		t.Errorf("after sending: retry %v, %q", f.retry, f.err)
	}
}
