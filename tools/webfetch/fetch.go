package webfetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// ErrBlocked marks a destination refused by the network checks: a private
// or reserved address, a port the operator has not opened, a cloud
// metadata address.
var ErrBlocked = errors.New("destination not allowed")

// blockedError is a refusal by the network checks. Its text is what the
// model reads, so it says why without naming the address: at connect time
// that is what a name resolved to, which the model has no business
// knowing. The address goes to the log instead.
type blockedError struct {
	why  string         // for the model
	addr netip.AddrPort // for the log; zero when the refusal is not about one address
	err  error          // the guard's own words, for the log
}

func (e *blockedError) Error() string { return ErrBlocked.Error() + ": " + e.why }
func (e *blockedError) Unwrap() error { return ErrBlocked }

// metadataAddrs answer cloud instance-metadata or credential requests, or
// are a cloud host's private control channel. They are refused in every
// mode: under AllowPrivate, for hosts the operator seeded, and (for the
// public 168.63.129.16) where the private-address guard would let them by.
// Sources: each provider's documentation of its metadata service.
var metadataAddrs = []netip.Prefix{
	// AWS IMDS and ECS task metadata (169.254.169.254, 169.254.170.2), EKS
	// Pod Identity (169.254.170.23), GCP (metadata.google.internal resolves
	// here), Azure IMDS, OCI, DigitalOcean, Hetzner, Linode/Akamai,
	// OpenStack, Tencent (169.254.0.23): all link-local IPv4.
	netip.MustParsePrefix("169.254.0.0/16"),
	// AWS over IPv6 on Nitro: IMDS fd00:ec2::254, DNS fd00:ec2::253, Time
	// Sync fd00:ec2::123, EKS Pod Identity fd00:ec2::23 (credentials). AWS
	// places its host services in this /64; refuse all of it.
	netip.MustParsePrefix("fd00:ec2::/64"),
	// GCP's metadata server for IPv6-only VMs.
	netip.MustParsePrefix("fd20:ce::254/128"),
	// Oracle Cloud (OCI Classic) metadata.
	netip.MustParsePrefix("192.0.0.192/32"),
	// Alibaba Cloud metadata.
	netip.MustParsePrefix("100.100.100.200/32"),
	// Azure WireServer: a public address that every Azure VM reaches as a
	// host channel (extension config, certificates). Public, so only this
	// list stops it when the checks are on.
	netip.MustParsePrefix("168.63.129.16/32"),
	// 169.254.169.254 embedded in link-local IPv6.
	netip.MustParsePrefix("fe80::a9fe:a9fe/128"),
}

func (f *Fetcher) defaultCheckAddr(ap netip.AddrPort) error {
	if err := checkMetadata(ap); err != nil {
		return err
	}
	if f.allowPrivate {
		return nil
	}
	// The guard allows any port: ports are portAllowed's business.
	if err := f.guard.SafeAddr(ap.Addr()); err != nil {
		return &blockedError{why: "the address is private or reserved", addr: ap, err: err}
	}
	return nil
}

func checkMetadata(ap netip.AddrPort) error {
	ip := ap.Addr().Unmap().WithZone("")
	for _, a := range append([]netip.Addr{ip}, embeddedIPv4(ip)...) {
		for _, p := range metadataAddrs {
			if p.Contains(a) {
				return &blockedError{why: "the address is a cloud metadata address", addr: ap}
			}
		}
	}
	return nil
}

// portAllowed reports whether host may be fetched on port: 80 and 443,
// the operator's Config.Ports, or any port under AllowPrivate. It is the
// one place ports are decided, at parse time and at connect time; host
// is there so per-host rules (an operator entry such as nas.local:5000)
// can be added here. host is "" when it is unknown.
func (f *Fetcher) portAllowed(host string, port uint16) bool {
	_ = host
	if f.allowPrivate || port == 80 || port == 443 {
		return true
	}
	return slices.Contains(f.ports, port)
}

// portRefused is the refusal for a port portAllowed said no to.
func (f *Fetcher) portRefused(port uint16) error {
	open := "80 and 443"
	if len(f.ports) > 0 {
		ps := make([]string, 0, len(f.ports))
		for _, p := range f.ports {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		open = "80, 443 and " + strings.Join(ps, ", ")
	}
	return &blockedError{why: fmt.Sprintf("port %d is not open for fetches (only %s)", port, open)}
}

var (
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalUse  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
	ipv4Compatible = netip.MustParsePrefix("::/96")
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries in the
// translation forms a gateway on the path may turn back into IPv4 (NAT64,
// 6to4, Teredo, IPv4-compatible). Without AllowPrivate the guard refuses
// all of these ranges (or their private embeddings) anyway; with it, the
// metadata check is the only one left and must see through them.
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() {
		return nil
	}
	b := ip.As16()
	v4 := func(i ...int) netip.Addr { return netip.AddrFrom4([4]byte{b[i[0]], b[i[1]], b[i[2]], b[i[3]]}) }
	switch {
	case nat64WellKnown.Contains(ip), ipv4Compatible.Contains(ip):
		return []netip.Addr{v4(12, 13, 14, 15)}
	case nat64LocalUse.Contains(ip):
		// The operator picks the prefix length (RFC 6052 section 2.2; the
		// byte 8 is always skipped): try every layout a /48 allows.
		return []netip.Addr{v4(6, 7, 9, 10), v4(7, 9, 10, 11), v4(9, 10, 11, 12), v4(12, 13, 14, 15)}
	case sixToFour.Contains(ip):
		return []netip.Addr{v4(2, 3, 4, 5)}
	case teredo.Contains(ip):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{v4(4, 5, 6, 7), client}
	}
	return nil
}

// isInternal reports whether a seeded host can only name an internal
// destination: an IP literal, or a name outside the public DNS.
func isInternal(host string) bool {
	if strings.HasPrefix(host, "*.") {
		return false
	}
	if _, ok := parseIP(host); ok {
		return true
	}
	return publicName(host) != nil
}

// internalDialKey marks, in a dial's context, the operator-trusted
// internal host the connection is for.
type internalDialKey struct{}

// dialHostKey carries, in a dial's context, the host name being dialled,
// so the connect-time port check can see it.
type dialHostKey struct{}

// controlInternal is control for the operator's internal hosts: the
// metadata addresses stay refused, and an entry that names ports opens
// those alone.
func (f *Fetcher) controlInternal(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &blockedError{why: "the address cannot be parsed", err: err}
	}
	host, _ := ctx.Value(dialHostKey{}).(string)
	if ports, listed := f.operatorPorts(host); listed && ports != nil && !slices.Contains(ports, ap.Port()) {
		return &blockedError{why: fmt.Sprintf("the operator's list opens %s on port %s only", host, joinPorts(ports))}
	}
	return checkMetadata(ap)
}

// control runs just before each connect, with the address the socket is
// about to reach: whatever a name resolved to, this is what counts.
func (f *Fetcher) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	if network != "tcp4" && network != "tcp6" {
		return &blockedError{why: "only TCP connections are made", err: fmt.Errorf("network %s", network)}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &blockedError{why: "the address cannot be parsed", err: err}
	}
	host, _ := ctx.Value(dialHostKey{}).(string)
	if !f.portAllowed(host, ap.Port()) {
		return f.portRefused(ap.Port())
	}
	return f.checkAddr(ap)
}

// errNoAddress is a lookup that succeeded with no address.
var errNoAddress = errors.New("the name has no address")

// dialContext resolves names with f.resolver and dials the addresses one
// by one; the dialer's Control hook checks each.
func (f *Fetcher) dialContext(d, internal *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		dialer := d
		if h, _ := ctx.Value(internalDialKey{}).(string); h != "" && h == host && f.internal[host] {
			dialer = internal
		}
		ctx = context.WithValue(ctx, dialHostKey{}, host)
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else {
			ips, err = f.resolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, fmt.Errorf("resolve %s: %w", host, err)
			}
			if len(ips) == 0 {
				return nil, fmt.Errorf("resolve %s: %w", host, errNoAddress)
			}
		}
		var errs []error
		for _, ip := range ips {
			conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errors.Join(errs...)
	}
}

// target is a URL that passed the checks, rewritten to its canonical host
// so that what was checked is what is dialled.
type target struct {
	url      *url.URL
	host     string // canonical, without port
	internal bool   // an internal host the operator seeded: no address checks
}

// checkURL parses raw and refuses what may never be fetched, before any
// human is asked: other schemes, user-info, odd host forms, and (unless
// AllowPrivate) other ports, private IP literals and internal names.
func (f *Fetcher) checkURL(raw string) (target, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("invalid URL: %w", err)
	}
	return f.checkParsed(u)
}

func (f *Fetcher) checkParsed(u *url.URL) (target, error) {
	// Every URL is echoed to the model (the result's first line, a
	// redirect it may ask for): a page must not choose that length.
	if n := len(u.String()); n > maxURLLen {
		return target{}, fmt.Errorf("the URL is %d bytes long; at most %d can be fetched", n, maxURLLen)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return target{}, fmt.Errorf("only http and https URLs can be fetched, not %q", u.Redacted())
	}
	if u.Opaque != "" || u.Host == "" {
		return target{}, fmt.Errorf("%q has no host: give an absolute URL like https://example.com/page", u.Redacted())
	}
	if u.User != nil {
		return target{}, fmt.Errorf("URLs with user-info (user@ or user:password@ before the host) are not allowed: %q", u.Redacted())
	}
	hostname := u.Hostname()
	if strings.Contains(hostname, "%") {
		return target{}, fmt.Errorf("%q: a host with a zone or percent-encoding is not allowed", u.Host)
	}
	port := u.Port()
	portNum := uint16(443)
	if u.Scheme == "http" {
		portNum = 80
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return target{}, fmt.Errorf("invalid port %q", port)
		}
		portNum = uint16(n)
	}
	host, err := Canonical(hostname)
	if err != nil {
		return target{}, err
	}
	if strings.HasPrefix(host, "*.") {
		return target{}, fmt.Errorf("%q is not a host name", hostname)
	}
	ip, isIP := parseIP(host)
	internal := f.internal[host]
	switch {
	case internal && isIP:
		if err := checkMetadata(netip.AddrPortFrom(ip, portNum)); err != nil {
			return target{}, err
		}
	case internal:
	default:
		if !f.portAllowed(host, portNum) {
			return target{}, f.portRefused(portNum)
		}
		if isIP {
			if err := f.checkAddr(netip.AddrPortFrom(ip, portNum)); err != nil {
				return target{}, err
			}
		} else if !f.allowPrivate {
			if err := publicName(host); err != nil {
				return target{}, fmt.Errorf("%w: %q %v", ErrBlocked, host, err)
			}
		}
	}
	t := *u
	t.User = nil
	t.Fragment, t.RawFragment = "", ""
	t.Host = host
	if isIP && ip.Is6() {
		t.Host = "[" + host + "]"
	}
	if port != "" {
		t.Host = net.JoinHostPort(host, port)
	}
	// The operator's port rule and the names that can only be internal
	// apply to every hop of a redirect, not only to the model's URL.
	tg := target{url: &t, host: host, internal: internal}
	if err := f.checkTarget(tg); err != nil {
		return target{}, err
	}
	return tg, nil
}

// notFollowedError reports a redirect to a host the fetch may not reach
// without a human; the model is told where it pointed.
type notFollowedError struct{ to string }

func (e *notFollowedError) Error() string {
	return fmt.Sprintf("the page redirects to %s, whose domain is not on the allowlist, so it was not followed; "+
		"call %s with that URL to ask a human to approve it", e.to, ToolFetch)
}

// acquireSlot waits for one of the MaxConcurrent slots, so that the
// memory and connections of fetches stay bounded however many prompts
// run; ctx ends the wait. The returned func gives the slot back.
func (f *Fetcher) acquireSlot(ctx context.Context, u *url.URL) (func(), error) {
	release := func() { <-f.slots }
	select {
	case f.slots <- struct{}{}:
		return release, nil
	default:
	}
	f.log.DebugContext(ctx, "web-fetch waits for a free slot", "url", u.Redacted(), "max_concurrent", cap(f.slots))
	select {
	case f.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fetch %s: %w", u.Redacted(), context.Cause(ctx))
	}
}

// fetch reads t, following at most maxRedirects redirects that stay on
// listed hosts or on approvedHost, and renders the body for the model.
func (f *Fetcher) fetch(ctx context.Context, t target, approvedHost string) (string, error) {
	release, err := f.acquireSlot(ctx, t.url)
	if err != nil {
		return "", err
	}
	defer release()
	// The time limit starts once the fetch runs: waiting for a slot is
	// not the site's slowness.
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	seen := map[string]bool{}
	for hop := 0; ; hop++ {
		seen[t.url.String()] = true
		dctx := ctx
		if t.internal {
			dctx = context.WithValue(ctx, internalDialKey{}, t.host)
		}
		resp, err := f.get(dctx, t.url)
		if err != nil {
			return "", f.describe(ctx, t.url, "", err)
		}
		if !isRedirect(resp.StatusCode) {
			defer resp.Body.Close()
			return f.render(ctx, t.url, resp)
		}
		loc := resp.Header.Get("Location")
		// Draining a little lets the server finish its write; the rest is
		// thrown away with the connection.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if loc == "" {
			return "", fmt.Errorf("%s answered %s without a Location", t.url.Redacted(), clip(resp.Status, maxStatusLen))
		}
		if len(loc) > maxURLLen {
			return "", fmt.Errorf("%s redirects to a URL of %d bytes; at most %d can be followed", t.url.Redacted(), len(loc), maxURLLen)
		}
		next, err := t.url.Parse(loc)
		if err != nil {
			return "", fmt.Errorf("%s redirects to an invalid URL %q: %v", t.url.Redacted(), loc, err)
		}
		nt, err := f.checkParsed(next)
		if err != nil {
			return "", fmt.Errorf("redirect to %s refused: %w", next.Redacted(), err)
		}
		if t.url.Scheme == "https" && nt.url.Scheme == "http" {
			return "", fmt.Errorf("redirect from https to plain http (%s) refused", nt.url.Redacted())
		}
		if seen[nt.url.String()] {
			return "", fmt.Errorf("redirect loop: %s was already visited", nt.url.Redacted())
		}
		if hop+1 > maxRedirects {
			return "", fmt.Errorf("more than %d redirects; the last pointed to %s", maxRedirects, nt.url.Redacted())
		}
		if nt.host != approvedHost {
			ok, err := f.allowed(ctx, nt.host)
			if err != nil {
				return "", err
			}
			if !ok {
				return "", &notFollowedError{to: nt.url.String()}
			}
		}
		f.log.DebugContext(ctx, "web-fetch redirect", "from", t.url.Redacted(), "to", nt.url.Redacted())
		t = nt
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

func (f *Fetcher) get(ctx context.Context, u *url.URL) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", f.userAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,application/xml;q=0.8,text/*;q=0.7")
	return f.client.Do(req)
}

// clip cuts s to at most n runes, saying so.
func clip(s string, n int) string {
	if c := cutRunes(s, n); len(c) < len(s) {
		return c + "… [cut]"
	}
	return s
}

// render reads the body within the limits and turns it into text for the
// model: HTML as Markdown; text, JSON and XML as they are.
func (f *Fetcher) render(ctx context.Context, u *url.URL, resp *http.Response) (string, error) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("fetch %s: the server answered %s", u.Redacted(), clip(resp.Status, maxStatusLen))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("fetch %s: timed out after %s while reading the body", u.Redacted(), f.timeout)
		}
		return "", f.describe(ctx, u, "while reading the body", err)
	}
	bodyCut := int64(len(body)) > f.maxBody
	if bodyCut {
		body = body[:f.maxBody]
	}

	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = http.DetectContentType(body)
	}
	media, _, err := mime.ParseMediaType(ctype)
	if err != nil {
		return "", fmt.Errorf("fetch %s: unreadable content type %q", u.Redacted(), clip(ctype, maxStatusLen))
	}
	kind := contentKind(media)
	// The server chose the media type, and with it how long the quotes
	// below would be.
	media = clip(media, maxStatusLen)
	if kind == kindOther {
		return "", fmt.Errorf("fetch %s: content type %s cannot be read; only HTML, text, JSON and XML can", u.Redacted(), media)
	}
	if kind != kindJSON {
		// Legacy charsets become UTF-8; HTML may name its charset in a
		// meta tag, which DetermineEncoding reads.
		enc, _, _ := charset.DetermineEncoding(body, ctype)
		if dec, err := enc.NewDecoder().Bytes(body); err == nil {
			body = dec
		}
	}
	if bytes.IndexByte(body, 0) >= 0 {
		return "", fmt.Errorf("fetch %s: the body is binary although it is labelled %s", u.Redacted(), media)
	}
	text := strings.ToValidUTF8(string(body), "\uFFFD")
	pruned, plain := false, false
	if kind == kindHTML {
		// The model sees MaxResult characters at most; parsing and
		// converting the rest of a large page would only make garbage
		// (the converter allocates ~90 bytes per input byte), and a page
		// of bare markup costs far more: the scan bounds both.
		scan := scanMarkup(text, 2*f.maxResult)
		if scan.plain {
			plain = true
			text, pruned = plainText(text, f.maxResult)
		} else {
			doc, err := html.Parse(strings.NewReader(text[:scan.end]))
			if err != nil {
				return "", fmt.Errorf("fetch %s: parse HTML: %w", u.Redacted(), err)
			}
			pruned = pruneAfterText(doc, 2*f.maxResult) || scan.cut
			md, err := f.conv.ConvertNode(doc, converter.WithContext(ctx), converter.WithDomain(u.String()))
			if err != nil {
				return "", fmt.Errorf("fetch %s: convert HTML: %w", u.Redacted(), err)
			}
			text = string(md)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Fetched %s (%s)\n", u.String(), media)
	if bodyCut {
		fmt.Fprintf(&b, "[The body was longer than %d bytes; only the first %d were read.]\n", f.maxBody, f.maxBody)
	}
	if plain {
		b.WriteString("[The page has more markup than can be converted; its text is shown without formatting.]\n")
	}
	b.WriteString("\n")
	switch n := utf8.RuneCountInString(text); {
	case n > f.maxResult && pruned:
		b.WriteString(cutRunes(text, f.maxResult))
		fmt.Fprintf(&b, "\n\n[Cut: the page is longer; only the first %d characters are shown.]", f.maxResult)
	case n > f.maxResult:
		b.WriteString(cutRunes(text, f.maxResult))
		fmt.Fprintf(&b, "\n\n[Cut: the content has %d characters; only the first %d are shown.]", n, f.maxResult)
	case pruned:
		b.WriteString(text)
		b.WriteString("\n\n[Cut: the page goes on, but the rest could not be read.]")
	default:
		b.WriteString(text)
	}
	return b.String(), nil
}

// pruneAfterText removes every node that follows, in document order, the
// text node where the visible text passes budget characters. It reports
// whether it removed anything.
func pruneAfterText(doc *html.Node, budget int) bool {
	n := 0
	var last *html.Node
	// An explicit stack: a hostile page may nest elements very deeply.
	stack := []*html.Node{doc}
	for len(stack) > 0 && last == nil {
		node := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch node.Type {
		case html.ElementNode:
			switch node.DataAtom {
			case atom.Head, atom.Script, atom.Style, atom.Noscript, atom.Template:
				continue
			}
		case html.TextNode:
			n += utf8.RuneCountInString(strings.TrimSpace(node.Data))
			if n > budget {
				last = node
			}
			continue
		}
		for c := node.LastChild; c != nil; c = c.PrevSibling {
			stack = append(stack, c)
		}
	}
	if last == nil {
		return false
	}
	removed := false
	for x := last; x.Parent != nil; x = x.Parent {
		for s := x.NextSibling; s != nil; {
			next := s.NextSibling
			x.Parent.RemoveChild(s)
			s = next
			removed = true
		}
	}
	return removed
}

func cutRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

type kind int

const (
	kindOther kind = iota
	kindHTML
	kindText
	kindJSON
)

func contentKind(media string) kind {
	switch {
	case media == "text/html" || media == "application/xhtml+xml":
		return kindHTML
	case media == "application/json" || strings.HasSuffix(media, "+json"):
		return kindJSON
	case strings.HasPrefix(media, "text/"),
		media == "application/xml" || strings.HasSuffix(media, "+xml"),
		media == "application/javascript", media == "application/x-ndjson":
		return kindText
	}
	return kindOther
}
