package webfetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"code.dny.dev/ssrf"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"

	"tollgate/prompt"
)

// The tool names, as the model sees them.
const (
	ToolFetch        = "web-fetch.fetch"
	ToolAddDomain    = "web-fetch.add-domain"
	ToolListDomains  = "web-fetch.list-domains"
	ToolRemoveDomain = "web-fetch.remove-domain"
)

// AddDomainReason is the reason a human reads before allowing add-domain.
const AddDomainReason = "Adding a domain to the allowlist grants permanent fetch access."

// SeededBy is the addedBy recorded for entries seeded from Config.Seed.
const SeededBy = "config"

// Defaults for the zero values of Config.
const (
	DefaultTimeout   = 15 * time.Second
	DefaultMaxBody   = 2 << 20
	DefaultMaxResult = 20000
	DefaultUserAgent = "Tollgate/1 (Telegram agent bot; web-fetch tool)"
	// DefaultMaxConcurrent bounds the fetches running at once.
	DefaultMaxConcurrent = 4
)

// maxRedirects bounds the hops of one fetch.
const maxRedirects = 5

// maxURLLen bounds a URL the fetch tool reads or follows, and so the URLs
// its results quote; maxStatusLen bounds server text quoted in an error.
const (
	maxURLLen    = 4096
	maxStatusLen = 300
)

// Resolver looks up the addresses of a host name; *net.Resolver
// implements it. It is a seam so tests can point names at httptest
// servers while the connect-time check stays on.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Fetcher.
type Config struct {
	// Store keeps the allowlist. Required.
	Store Store
	// Seed is added to the allowlist at start (WEBFETCH_ALLOWED_DOMAINS).
	// The operator is trusted: an entry may name any host, localhost and
	// IP addresses included, but it must be well formed (see Canonical).
	// An entry that can only be internal (an IP literal, localhost, a name
	// outside the public DNS such as nas.local) is reachable on any port
	// without AllowPrivate; the checks stay on for every other host.
	// Blank entries are skipped.
	Seed []string
	// AllowPrivate lifts the address and port checks, so loopback,
	// private networks and any port can be fetched: for local
	// development and tests only. Cloud metadata addresses stay refused.
	AllowPrivate bool
	// Timeout bounds one fetch, redirects and body included (default 15s).
	Timeout time.Duration
	// MaxBody bounds the bytes read of a body after decompression
	// (default 2 MiB); a longer body is cut and the model told so.
	MaxBody int64
	// MaxResult bounds the characters of content the model gets
	// (default 20000); longer content is cut with a note.
	MaxResult int
	// UserAgent names the bot to the sites it reads (default
	// DefaultUserAgent).
	UserAgent string
	// Resolver looks up host names (default: the system's, via
	// net.Resolver).
	Resolver Resolver
	Logger   *slog.Logger // default: discard
	// Ports are opened for fetches besides 80 and 443
	// (WEBFETCH_PORTS), for every host; the address checks still apply
	// on them. Each must be 1-65535.
	Ports []int
	// MaxConcurrent bounds the fetches that run at once
	// (WEBFETCH_MAX_CONCURRENT, default DefaultMaxConcurrent), and with
	// it the memory they take; a further fetch waits for a free slot.
	MaxConcurrent int
}

// Fetcher holds the web-fetch tools. Safe for concurrent use.
type Fetcher struct {
	store  Store
	seeded map[string]bool
	// internal are seeded hosts that can only be internal (IP literals,
	// localhost, special-use names such as .local): the operator named them
	// on purpose, so the address and port checks are lifted for them alone.
	internal     map[string]bool
	allowPrivate bool
	timeout      time.Duration
	maxBody      int64
	maxResult    int
	userAgent    string
	resolver     Resolver
	log          *slog.Logger
	guard        *ssrf.Guardian
	client       *http.Client
	conv         *converter.Converter
	tools        []*prompt.Tool
	// checkAddr decides whether an address may be connected to; every
	// address check goes through it, at parse time and at connect time.
	checkAddr func(netip.AddrPort) error
	ports     []uint16      // opened besides 80 and 443 (Config.Ports)
	slots     chan struct{} // one token per running fetch (Config.MaxConcurrent)
}

// New checks cfg, seeds the allowlist and returns a Fetcher. A malformed
// seed entry is an error that names it, and nothing is seeded then; a
// store failure is returned wrapped. It logs a warning while
// AllowPrivate is set. ctx bounds the seeding.
func New(ctx context.Context, cfg Config) (*Fetcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("webfetch: no Store")
	}
	if cfg.Timeout < 0 || cfg.MaxBody < 0 || cfg.MaxResult < 0 {
		return nil, errors.New("webfetch: Timeout, MaxBody and MaxResult must not be negative")
	}
	f := &Fetcher{
		store:        cfg.Store,
		seeded:       make(map[string]bool),
		internal:     make(map[string]bool),
		allowPrivate: cfg.AllowPrivate,
		timeout:      orDefault(cfg.Timeout, DefaultTimeout),
		maxBody:      orDefault(cfg.MaxBody, DefaultMaxBody),
		maxResult:    orDefault(cfg.MaxResult, DefaultMaxResult),
		userAgent:    orDefault(cfg.UserAgent, DefaultUserAgent),
		resolver:     cfg.Resolver,
		log:          cfg.Logger,
		guard:        ssrf.New(),
	}
	if f.resolver == nil {
		f.resolver = &net.Resolver{}
	}
	if f.log == nil {
		f.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f.checkAddr = f.defaultCheckAddr
	for _, p := range cfg.Ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("webfetch: port %d is not a port (1-65535)", p)
		}
		f.ports = append(f.ports, uint16(p))
	}
	if cfg.MaxConcurrent < 0 {
		return nil, errors.New("webfetch: MaxConcurrent must not be negative")
	}
	f.slots = make(chan struct{}, orDefault(cfg.MaxConcurrent, DefaultMaxConcurrent))

	var seeds []string
	for _, s := range cfg.Seed {
		if strings.TrimSpace(s) == "" {
			continue
		}
		c, err := Canonical(s)
		if err != nil {
			return nil, fmt.Errorf("webfetch: allowed domain %q: %w", s, err)
		}
		seeds = append(seeds, c)
	}
	for _, c := range seeds {
		if _, err := f.store.AddDomain(ctx, c, SeededBy); err != nil {
			return nil, fmt.Errorf("webfetch: seed allowlist with %s: %w", c, err)
		}
		f.seeded[c] = true
		if isInternal(c) {
			f.internal[c] = true
		}
	}
	if f.allowPrivate {
		f.log.Warn("web-fetch may reach private addresses and any port (WEBFETCH_ALLOW_PRIVATE): for local development only")
	}

	dialer := &net.Dialer{Timeout: 10 * time.Second, ControlContext: f.control}
	internalDialer := &net.Dialer{Timeout: 10 * time.Second, ControlContext: f.controlInternal}
	f.client = &http.Client{
		Transport: &http.Transport{
			// No proxy: a proxy would connect on our behalf, out of
			// reach of the address check.
			Proxy:                  nil,
			DialContext:            f.dialContext(dialer, internalDialer),
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:    10 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
			// One connection per fetch: nothing lingers between calls,
			// and a pooled connection cannot outlive an allowlist change.
			DisableKeepAlives: true,
		},
		// Redirects are followed by hand so each hop is checked and an
		// unlisted one can be reported instead of followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	f.conv = converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
	))
	tools, err := f.buildTools()
	if err != nil {
		return nil, err
	}
	f.tools = tools
	return f, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Tools returns the four web-fetch tools: fetch, add-domain, list-domains
// and remove-domain.
func (f *Fetcher) Tools() []*prompt.Tool {
	return append([]*prompt.Tool(nil), f.tools...)
}

type fetchInput struct {
	URL string `json:"url" jsonschema:"the absolute http or https URL to read"`
}

type domainInput struct {
	Domain string `json:"domain" jsonschema:"a host name such as docs.example.com, or *.example.com for all its subdomains"`
}

type noInput struct{}

func (f *Fetcher) buildTools() ([]*prompt.Tool, error) {
	fetch, err := prompt.NewTool(ToolFetch,
		"Read a web page or document by URL and return it as Markdown or text. "+
			"Hosts on the allowlist are read at once; any other host needs a human's approval of that one call.",
		f.fetchGate, f.fetchInvoke)
	if err != nil {
		return nil, err
	}
	add, err := prompt.NewTool(ToolAddDomain,
		"Ask a human to add a domain to the fetch allowlist for good, so later fetches of it need no approval.",
		f.addGate, f.addInvoke)
	if err != nil {
		return nil, err
	}
	list, err := prompt.NewTool(ToolListDomains,
		"List the domains on the fetch allowlist.",
		nil, f.listInvoke)
	if err != nil {
		return nil, err
	}
	remove, err := prompt.NewTool(ToolRemoveDomain,
		"Remove a domain from the fetch allowlist.",
		nil, f.removeInvoke)
	if err != nil {
		return nil, err
	}
	return []*prompt.Tool{fetch, add, list, remove}, nil
}

// allowed loads the allowlist and reports whether canonical host h is on it.
func (f *Fetcher) allowed(ctx context.Context, h string) (bool, error) {
	entries, err := f.store.Domains(ctx)
	if err != nil {
		return false, fmt.Errorf("read the allowlist: %w", err)
	}
	return newAllowlist(entries, f.seeded).matches(h), nil
}

func (f *Fetcher) fetchGate(ctx context.Context, in fetchInput) (prompt.Requirement, error) {
	t, err := f.checkURL(in.URL)
	if err != nil {
		return prompt.Requirement{}, err
	}
	ok, err := f.allowed(ctx, t.host)
	if err != nil {
		return prompt.Requirement{}, err
	}
	if ok {
		return prompt.Requirement{Reason: fmt.Sprintf("Domain %q is on the allowlist.", t.host)}, nil
	}
	return prompt.Requirement{
		Required: true,
		Reason:   fmt.Sprintf("Domain %q is not on the allowlist. Approval required to fetch.", t.host),
	}, nil
}

func (f *Fetcher) fetchInvoke(ctx context.Context, in fetchInput) (string, error) {
	t, err := f.checkURL(in.URL)
	if err != nil {
		return "", err
	}
	ok, err := f.allowed(ctx, t.host)
	if err != nil {
		return "", err
	}
	// A human's approval covers this call and its URL's host only; it is
	// not remembered.
	approvedHost := ""
	if ci, found := prompt.CallFromContext(ctx); found && ci.Approved {
		approvedHost = t.host
	}
	if !ok && approvedHost == "" {
		return "", fmt.Errorf("domain %q is not on the allowlist and this call was not approved", t.host)
	}
	return f.fetch(ctx, t, approvedHost)
}

func (f *Fetcher) addGate(_ context.Context, in domainInput) (prompt.Requirement, error) {
	// Validating here, before anyone is asked, spares the human a question
	// whose answer could only be an error.
	c, err := ValidateNewDomain(in.Domain)
	if err != nil {
		return prompt.Requirement{}, err
	}
	reason := AddDomainReason
	if strings.Contains(c, "xn--") {
		// The human sees the model's Unicode text, which may imitate
		// another name; show what would really be stored.
		reason += fmt.Sprintf(" It is stored as %q.", c)
	}
	return prompt.Requirement{Required: true, Reason: reason}, nil
}

func (f *Fetcher) addInvoke(ctx context.Context, in domainInput) (string, error) {
	c, err := ValidateNewDomain(in.Domain)
	if err != nil {
		return "", err
	}
	by := "agent"
	if ci, ok := prompt.CallFromContext(ctx); ok {
		by = fmt.Sprintf("prompt %s call %s", ci.PromptID, ci.CallID)
	}
	added, err := f.store.AddDomain(ctx, c, by)
	if err != nil {
		return "", fmt.Errorf("add %s to the allowlist: %w", c, err)
	}
	if !added {
		return fmt.Sprintf("%s is already on the allowlist; nothing changed.", c), nil
	}
	f.log.InfoContext(ctx, "web-fetch allowlist extended", "domain", c, "by", by)
	return fmt.Sprintf("Added %s to the allowlist.", c), nil
}

func (f *Fetcher) listInvoke(ctx context.Context, _ noInput) (string, error) {
	entries, err := f.store.Domains(ctx)
	if err != nil {
		return "", fmt.Errorf("read the allowlist: %w", err)
	}
	if len(entries) == 0 {
		return "The allowlist is empty.", nil
	}
	return "Allowed domains:\n" + strings.Join(entries, "\n"), nil
}

func (f *Fetcher) removeInvoke(ctx context.Context, in domainInput) (string, error) {
	// Canonical, not ValidateNewDomain: the operator may have seeded hosts
	// the strict rules refuse, and taking access away is always fine.
	c, err := Canonical(in.Domain)
	if err != nil {
		return "", err
	}
	removed, err := f.store.RemoveDomain(ctx, c)
	if err != nil {
		return "", fmt.Errorf("remove %s from the allowlist: %w", c, err)
	}
	if !removed {
		return fmt.Sprintf("%s was not on the allowlist; nothing changed.", c), nil
	}
	f.log.InfoContext(ctx, "web-fetch allowlist shrunk", "domain", c)
	msg := fmt.Sprintf("Removed %s from the allowlist.", c)
	if f.seeded[c] {
		msg += " It is in the bot's configured list, so it returns at the next start."
	}
	return msg, nil
}
