package webfetch

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// logCapture is a Logger whose text the test can read back: the detail
// the model must not see has to be there.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// onWrite, when set before the logger is used, sees each line: a
	// test waits on it instead of sleeping.
	onWrite func(line string)
}

func (c *logCapture) Write(p []byte) (int, error) {
	if c.onWrite != nil {
		c.onWrite(string(p))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func (c *logCapture) contains(s string) bool { return strings.Contains(c.String(), s) }

func newLogCapture() (*logCapture, *slog.Logger) {
	c := &logCapture{}
	return c, slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
