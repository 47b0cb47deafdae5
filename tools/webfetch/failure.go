package webfetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"syscall"
)

// failedError is a failed fetch as the model reads it: what happened, in
// words, with no address a name resolved to, no resolver and no local
// socket. It still unwraps to the transport error, so code can ask
// errors.Is(err, ErrBlocked); the full text of that error is logged.
type failedError struct {
	msg string
	err error
}

func (e *failedError) Error() string { return e.msg }
func (e *failedError) Unwrap() error { return e.err }

// describe logs err in full and returns the model's version of it.
// while, if not empty, says what the fetch was doing ("while reading the
// body").
func (f *Fetcher) describe(ctx context.Context, u *url.URL, while string, err error) error {
	why := f.failureReason(ctx, u, err)
	if while != "" {
		why += " " + while
	}
	msg := fmt.Sprintf("fetch %s: %s", u.Redacted(), why)
	level := slog.LevelInfo
	attrs := []any{"url", u.Redacted(), "err", err}
	if errors.Is(err, ErrBlocked) {
		// A refusal at connect time is someone trying: the operator sees
		// where the name really pointed, the model only why.
		level = slog.LevelWarn
		msg = fmt.Sprintf("fetch %s refused: %s", u.Redacted(), ErrBlocked)
	}
	if b := (*blockedError)(nil); errors.As(err, &b) {
		msg = fmt.Sprintf("fetch %s refused: %s", u.Redacted(), b.Error())
		if b.addr.IsValid() {
			attrs = append(attrs, "addr", b.addr.String())
		}
		if b.err != nil {
			attrs = append(attrs, "guard", b.err.Error())
		}
	}
	f.log.Log(ctx, level, "web-fetch failed", attrs...)
	return &failedError{msg: msg, err: err}
}

// failureReason says in words why a request failed. Each case is written
// out, because the errors net and crypto/tls build quote addresses: "dial
// tcp 10.0.0.5:80: connect: connection refused", "lookup x on
// 127.0.0.53:53: no such host".
func (f *Fetcher) failureReason(ctx context.Context, u *url.URL, err error) string {
	var (
		dnsErr   *net.DNSError
		hostErr  x509.HostnameError
		authErr  x509.UnknownAuthorityError
		certErr  x509.CertificateInvalidError
		recErr   tls.RecordHeaderError
		alertErr tls.AlertError
		netErr   net.Error
	)
	host := u.Hostname()
	switch {
	case errors.Is(err, ErrBlocked):
		// describe words it.
		return "refused"
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("timed out after %s", f.timeout)
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &dnsErr):
		switch {
		case dnsErr.IsNotFound:
			return fmt.Sprintf("could not resolve %s: no such host", host)
		case dnsErr.IsTimeout:
			return fmt.Sprintf("could not resolve %s: the lookup timed out", host)
		}
		return fmt.Sprintf("could not resolve %s: the lookup failed", host)
	case errors.Is(err, errNoAddress):
		return fmt.Sprintf("could not resolve %s: it has no address", host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "the host cannot be reached"
	case errors.As(err, &hostErr):
		return fmt.Sprintf("the site's TLS certificate is not valid for %s", host)
	case errors.As(err, &authErr):
		return "the site's TLS certificate is not signed by a trusted authority"
	case errors.As(err, &certErr):
		if certErr.Reason == x509.Expired {
			return "the site's TLS certificate has expired or is not yet valid"
		}
		return "the site's TLS certificate is not valid"
	case errors.As(err, &recErr):
		return "the server does not speak TLS on this port"
	case errors.As(err, &alertErr):
		return "the TLS handshake failed"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the server closed the connection without a complete answer"
	}
	// Anything else: the innermost words, below the url and net wrappers
	// that name addresses, if they name none themselves.
	inner := err
	for {
		var ue *url.Error
		var oe *net.OpError
		switch {
		case errors.As(inner, &ue) && ue.Err != nil:
			inner = ue.Err
			continue
		case errors.As(inner, &oe) && oe.Err != nil:
			inner = oe.Err
			continue
		}
		break
	}
	// A transport error may quote what the server sent (a malformed
	// status line of up to MaxResponseHeaderBytes): clip it.
	text := clip(inner.Error(), maxStatusLen)
	if addrPattern.MatchString(text) {
		return "the request failed (the bot's log has the details)"
	}
	return text
}

// addrPattern matches IPv4 and IPv6 address literals and host:port
// pairs: text that contains one is not shown to the model.
var addrPattern = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}\b|(?i:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}|:\d{2,5}\b`)
