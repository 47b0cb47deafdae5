package webfetch

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
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

// AddDomainReason is the reason a human reads before allowing add-domain
// of canonical domain c. The bot shows it in the approval message itself,
// so it names what will be stored, in the form Display gives, whatever
// the model's input looked like.
func AddDomainReason(c string) string {
	what := "Add " + Display(c) + " to the fetch allowlist"
	if base, ok := strings.CutPrefix(c, "*."); ok {
		what = "Add " + Display(c) + " (every subdomain of " + Display(base) + ", not " + base + " itself) to the fetch allowlist"
	}
	return what + ": fetches there will need no approval until someone removes it."
}

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
	// Seed is the operator's list (WEBFETCH_ALLOWED_DOMAINS). It is kept
	// in memory, never in Store, so it is authoritative: an entry removed
	// from it is gone at the next start, and remove-domain cannot remove
	// one. The operator is trusted: an entry may name any host, localhost,
	// dotless names and IP addresses included, but it must be well formed
	// (see Canonical). An entry that can only be internal (an IP literal,
	// localhost, a name outside the public DNS such as nas.local) is
	// reachable on any port without AllowPrivate; written with a port
	// ("localhost:8080", "nas.local:5000") it is reachable on the ports
	// so listed alone. The checks stay on for every other host, and a
	// public host takes no port. Blank entries are skipped.
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
	store Store
	// operator is the operator's list (Config.Seed), by canonical entry,
	// with the ports an internal host's entries opened: nil when an entry
	// named it without a port (any port).
	operator map[string][]uint16
	// internal are the operator's hosts that can only be internal (IP literals,
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

// New checks cfg and returns a Fetcher. A malformed entry of Config.Seed
// is an error that names it. It logs a warning while AllowPrivate is set.
// It writes nothing to the store; ctx is kept for the signature's sake
// and for checks a future version may make at start.
func New(_ context.Context, cfg Config) (*Fetcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("webfetch: no Store")
	}
	if cfg.Timeout < 0 || cfg.MaxBody < 0 || cfg.MaxResult < 0 {
		return nil, errors.New("webfetch: Timeout, MaxBody and MaxResult must not be negative")
	}
	f := &Fetcher{
		store:        cfg.Store,
		operator:     make(map[string][]uint16),
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

	anyPort := make(map[string]bool)
	for _, s := range cfg.Seed {
		if strings.TrimSpace(s) == "" {
			continue
		}
		c, port, err := parseOperatorEntry(s)
		if err != nil {
			return nil, fmt.Errorf("webfetch: allowed domain %q: %w", s, err)
		}
		switch {
		case port == 0:
			anyPort[c] = true
			f.operator[c] = nil
		case !anyPort[c] && !slices.Contains(f.operator[c], port):
			f.operator[c] = append(f.operator[c], port)
		}
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
	// An "always" for a fetch covers its URL's host, exactly: not its
	// subdomains, not a parent domain.
	fetch.Scope = f.fetchScope
	// Operators' rules match a fetch by its host and path too.
	fetch.Fields = []prompt.Field{{Name: "host", Kind: prompt.FieldHost}, {Name: "path", Kind: prompt.FieldPath}}
	fetch.Derive = f.fetchFields
	add, err := prompt.NewTool(ToolAddDomain,
		"Ask a human to add a domain to the fetch allowlist for good, so later fetches of it need no approval.",
		f.addGate, f.addInvoke)
	if err != nil {
		return nil, err
	}
	// Its approval is a lasting grant already.
	add.NoGrants = true
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

// allowed loads the allowlist and reports whether canonical host h is on
// it: the operator's list or the entries humans added.
func (f *Fetcher) allowed(ctx context.Context, h string) (bool, error) {
	entries, err := f.store.Domains(ctx)
	if err != nil {
		return false, fmt.Errorf("read the allowlist: %w", err)
	}
	return newAllowlist(entries, f.operator).matches(h), nil
}

// operatorPorts reports whether the operator listed canonical host h by
// name (not through a wildcard), and which ports that opened: nil means
// an entry named the host without a port, so an internal host is
// reachable on any port (a public one on 80 and 443, as always); non-nil
// lists the only ports an internal host may be fetched on.
func (f *Fetcher) operatorPorts(h string) (ports []uint16, listed bool) {
	ports, listed = f.operator[h]
	return ports, listed
}

// checkTarget refuses, before anyone is asked, what a checked URL t could
// only fail at or should never reach, beyond what checkParsed knows: a
// port the operator did not open on an internal host it listed with
// ports; and, for hosts the operator did not list by name, a dotless name
// (only a local network resolves one), a cloud metadata service's name,
// and a name that spells a private, loopback or metadata address. With
// AllowPrivate, dotless names and private spellings pass: they are what
// local development reaches; metadata never does.
func (f *Fetcher) checkTarget(t target) error {
	h := t.host
	port := defaultPort(t.url)
	if ports, listed := f.operatorPorts(h); listed {
		if ports != nil && !slices.Contains(ports, port) {
			return fmt.Errorf("%w: the operator's list opens %s on port %s only, not on port %d", ErrBlocked, h, joinPorts(ports), port)
		}
		return nil
	}
	if _, isIP := parseIP(h); isIP {
		return nil // the address checks see the address itself
	}
	if !strings.Contains(h, ".") && !f.allowPrivate {
		return fmt.Errorf("%w: %q has no dot: a one-label name only resolves inside a local network, which web-fetch does not reach; "+
			"give the site's full domain name (like docs.example.com)", ErrBlocked, h)
	}
	inward := func(ip netip.Addr) bool { return f.checkAddr(netip.AddrPortFrom(ip, 443)) != nil }
	if err := inwardName(h, inward); err != nil {
		return fmt.Errorf("%w: %q %v", ErrBlocked, h, err)
	}
	return nil
}

// defaultPort is u's port, or its scheme's when none is written.
func defaultPort(u *url.URL) uint16 {
	if n, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(n)
	}
	if u.Scheme == "http" {
		return 80
	}
	return 443
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

func (f *Fetcher) fetchGate(ctx context.Context, in fetchInput) (prompt.Requirement, error) {
	t, err := f.checkURL(in.URL)
	if err == nil {
		err = f.checkTarget(t)
	}
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

func (f *Fetcher) fetchScope(input json.RawMessage) (prompt.Scope, error) {
	var in fetchInput
	if err := json.Unmarshal(input, &in); err != nil {
		return prompt.Scope{}, fmt.Errorf("decode input: %w", err)
	}
	t, err := f.checkURL(in.URL)
	if err != nil {
		return prompt.Scope{}, err
	}
	return prompt.Scope{Key: "host:" + t.host, Label: "fetches from " + t.host}, nil
}

// fetchFields gives a rule the URL's canonical host and its decoded path
// ("/" when empty).
func (f *Fetcher) fetchFields(input json.RawMessage) (map[string]string, error) {
	var in fetchInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("decode input: %w", err)
	}
	t, err := f.checkURL(in.URL)
	if err != nil {
		return nil, err
	}
	path := t.url.Path
	if path == "" {
		path = "/"
	}
	return map[string]string{"host": t.host, "path": path}, nil
}

func (f *Fetcher) fetchInvoke(ctx context.Context, in fetchInput) (string, error) {
	t, err := f.checkURL(in.URL)
	if err == nil {
		err = f.checkTarget(t)
	}
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

// validateAdd is add-domain's check of its input, in the gate and again
// in invoke: a domain the model may add, written as it will be stored.
func validateAdd(written string) (string, error) {
	c, err := ValidateNewDomain(written)
	if err != nil {
		return "", err
	}
	if err := checkWritten(written, c); err != nil {
		return "", err
	}
	return c, nil
}

// listedAs reports whether canonical entry c is on the allowlist as it
// stands (not merely covered by a wildcard): on the operator's list, or
// added by a human.
func (f *Fetcher) listedAs(ctx context.Context, c string) (operator, added bool, err error) {
	if _, ok := f.operator[c]; ok {
		return true, false, nil
	}
	entries, err := f.store.Domains(ctx)
	if err != nil {
		return false, false, fmt.Errorf("read the allowlist: %w", err)
	}
	return false, slices.Contains(entries, c), nil
}

func (f *Fetcher) addGate(ctx context.Context, in domainInput) (prompt.Requirement, error) {
	// Validating here, before anyone is asked, spares the human a question
	// whose answer could only be an error, or one about a name other than
	// the one written.
	c, err := validateAdd(in.Domain)
	if err != nil {
		return prompt.Requirement{}, err
	}
	op, added, err := f.listedAs(ctx, c)
	if err != nil {
		return prompt.Requirement{}, err
	}
	if op || added {
		// Nothing would change: no one need be asked.
		return prompt.Requirement{Reason: fmt.Sprintf("%s is already on the allowlist.", c)}, nil
	}
	return prompt.Requirement{Required: true, Reason: AddDomainReason(c)}, nil
}

func (f *Fetcher) addInvoke(ctx context.Context, in domainInput) (string, error) {
	c, err := validateAdd(in.Domain)
	if err != nil {
		return "", err
	}
	op, added, err := f.listedAs(ctx, c)
	if err != nil {
		return "", err
	}
	switch {
	case op:
		return fmt.Sprintf("%s is already on the operator's list; nothing changed.", c), nil
	case added:
		return fmt.Sprintf("%s is already on the allowlist; nothing changed.", c), nil
	}
	// The gate asks a human whenever something would change; this is the
	// second lock, should Invoke ever be reached without that answer.
	ci, ok := prompt.CallFromContext(ctx)
	if !ok || !ci.Approved {
		return "", fmt.Errorf("adding %s needs a human's approval and this call was not approved; nothing was added", c)
	}
	by := ci.ApprovedBy
	if by == "" {
		by = fmt.Sprintf("prompt %s call %s", ci.PromptID, ci.CallID)
	}
	ok, err = f.store.AddDomain(ctx, c, by)
	if err != nil {
		return "", fmt.Errorf("add %s to the allowlist: %w", c, err)
	}
	if !ok {
		return fmt.Sprintf("%s is already on the allowlist; nothing changed.", c), nil
	}
	f.log.InfoContext(ctx, "web-fetch allowlist extended", "domain", c, "by", by, "prompt", ci.PromptID, "call", ci.CallID)
	return fmt.Sprintf("Added %s to the allowlist.", c), nil
}

func (f *Fetcher) listInvoke(ctx context.Context, _ noInput) (string, error) {
	entries, err := f.store.Entries(ctx)
	if err != nil {
		return "", fmt.Errorf("read the allowlist: %w", err)
	}
	lines := make([]string, 0, len(entries)+len(f.operator))
	for c, ports := range f.operator {
		from := "operator"
		if ports != nil {
			from = "port " + joinPorts(ports) + " only; operator"
		}
		lines = append(lines, listLine(c, from))
	}
	for c, by := range entries {
		if _, op := f.operator[c]; !op {
			lines = append(lines, listLine(c, "added by "+by))
		}
	}
	if len(lines) == 0 {
		return "The allowlist is empty.", nil
	}
	slices.Sort(lines)
	return "Allowed domains (operator: from the bot's configuration, only the operator can remove them):\n" + strings.Join(lines, "\n"), nil
}

// listLine is one line of list-domains: the entry and where it came from,
// with the Unicode form of an international name.
func listLine(c, from string) string {
	if u := unicodeForm(c); u != c {
		from = u + "; " + from
	}
	return c + " (" + from + ")"
}

func (f *Fetcher) removeInvoke(ctx context.Context, in domainInput) (string, error) {
	// Canonical, not ValidateNewDomain: a human may have added a name the
	// rules now refuse, and taking access away is always fine.
	c, err := Canonical(in.Domain)
	if err != nil {
		// "localhost:8080" as list-domains shows it.
		if h, _, perr := parseOperatorEntry(in.Domain); perr == nil {
			c, err = h, nil
		}
	}
	if err != nil {
		return "", err
	}
	if _, op := f.operator[c]; op {
		return "", fmt.Errorf("%s is on the operator's list (WEBFETCH_ALLOWED_DOMAINS); only the operator can remove it", c)
	}
	removed, err := f.store.RemoveDomain(ctx, c)
	if err != nil {
		return "", fmt.Errorf("remove %s from the allowlist: %w", c, err)
	}
	if !removed {
		return fmt.Sprintf("%s was not on the allowlist; nothing changed.", c), nil
	}
	f.log.InfoContext(ctx, "web-fetch allowlist shrunk", "domain", c)
	return fmt.Sprintf("Removed %s from the allowlist.", c), nil
}
