package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// drainWait bounds how long output is read after the process group was
// killed: a process that left the group (setsid) may hold a pipe open.
const drainWait = 2 * time.Second

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	max   int
	buf   []byte
	total int64
}

func (c *capped) readFrom(r io.Reader) {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.total += int64(n)
			if room := c.max - len(c.buf); room > 0 {
				c.buf = append(c.buf, chunk[:min(n, room)]...)
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *capped) String() string {
	s := strings.ToValidUTF8(string(c.buf), "\uFFFD")
	if c.total > int64(len(c.buf)) {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += fmt.Sprintf("[output cut at %d bytes]", c.max)
	}
	return s
}

func (s *Shell) invoke(ctx context.Context, in runInput) (string, error) {
	dir, err := s.resolveDir(in.Dir)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(s.bash, "-c", in.Command)
	cmd.Dir = dir
	cmd.Env = s.environ()
	cmd.Stdin = nil // /dev/null
	// Its own process group, so a timeout kills what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Pipes of our own, so Wait returns when bash exits, not when the
	// last process holding its output does.
	outR, outW, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("run: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return "", fmt.Errorf("run: %w", err)
	}
	defer outR.Close()
	defer errR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		return "", fmt.Errorf("start bash: %w", err)
	}
	stdout, stderr := &capped{max: s.maxOutput}, &capped{max: s.maxOutput}
	var readers sync.WaitGroup
	readers.Go(func() { stdout.readFrom(outR) })
	readers.Go(func() { stderr.readFrom(errR) })

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	var timedOut bool
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}
	// Whatever it left running in its group goes too: nothing a call
	// starts outlives it.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.log.Warn("kill process group", "pgid", cmd.Process.Pid, "err", err)
	}
	if timedOut || ctx.Err() != nil {
		waitErr = <-waited
	}
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainWait):
		outR.Close()
		errR.Close()
		<-drained
	}
	elapsed := time.Since(start)

	var status string
	switch {
	case timedOut:
		status = fmt.Sprintf("timed out after %s; the process group was killed", s.timeout)
	case ctx.Err() != nil:
		s.log.Info("shell run canceled", "dir", dir, "elapsed", elapsed)
		return "", fmt.Errorf("run canceled; the process group was killed: %w", ctx.Err())
	default:
		status = exitStatus(waitErr)
	}
	s.log.Info("shell run", "dir", dir, "status", status, "elapsed", elapsed,
		"stdout_bytes", stdout.total, "stderr_bytes", stderr.total)
	var b strings.Builder
	b.WriteString(status + "\n")
	writeStream(&b, "stdout", stdout)
	writeStream(&b, "stderr", stderr)
	return b.String(), nil
}

func writeStream(b *strings.Builder, name string, c *capped) {
	if c.total == 0 {
		fmt.Fprintf(b, "[%s: empty]\n", name)
		return
	}
	fmt.Fprintf(b, "[%s]\n%s", name, c.String())
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Error() // "exit status 1", "signal: killed"
	}
	return "wait: " + err.Error()
}

// environ is the allowlisted variables that are set, and no other.
func (s *Shell) environ() []string {
	env := []string{}
	for _, n := range s.env {
		if v, ok := s.lookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	return env
}
