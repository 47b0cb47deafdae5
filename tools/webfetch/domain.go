package webfetch

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// hostProfile maps a name the way lookups do (case, width, compatibility
// forms) and refuses what DNS cannot carry. net/http dials through the
// same kind of mapping, so the name we check is the name it would dial;
// we also put our form into the URL so there is nothing left to map.
var hostProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.VerifyDNSLength(true),
)

// specialTLDs are reserved for use inside a network or an overlay (RFC
// 6761, 6762, 7686, 8375): nothing there is a public web site. The other
// special names (local, internal, test, …) are not ICANN top-level
// domains, which ValidateNewDomain and the fetch checks refuse anyway.
var specialTLDs = map[string]bool{"localhost": true, "arpa": true, "onion": true, "local": true, "internal": true}

// Canonical returns domain in the allowlist's one form: lower case, one
// trailing dot removed, an international name as punycode A-labels, an IP
// address in its standard text form. A leading "*." is kept. It refuses
// anything that is not a bare host name: a scheme, port, path, user-info,
// an empty label, a wildcard elsewhere, an IPv4 address in a non-standard
// form ("127.1", "0x7f000001", "2130706433"). It does not judge whether
// the host is a good thing to fetch: see ValidateNewDomain.
func Canonical(domain string) (string, error) {
	d := strings.TrimSpace(domain)
	if d == "" {
		return "", errors.New("empty domain")
	}
	if !utf8.ValidString(d) {
		// idna would turn each bad byte into U+FFFD: different inputs
		// would become one entry that Canonical itself then refuses.
		return "", fmt.Errorf("%q is not valid UTF-8", domain)
	}
	wildcard := strings.HasPrefix(d, "*.")
	if wildcard {
		d = d[2:]
	}
	if strings.Contains(d, "://") {
		return "", fmt.Errorf("%q is a URL: give only the host name", domain)
	}
	if strings.Contains(d, "*") {
		return "", fmt.Errorf("%q: a wildcard is only allowed as a leading \"*.\"", domain)
	}
	if i := strings.IndexAny(d, "/?#@\\%"); i >= 0 {
		return "", fmt.Errorf("%q is not a host name: it contains %q", domain, d[i])
	}
	// One trailing dot names the root; browsers read "127.0.0.1." as
	// 127.0.0.1, so it goes before the IP check too.
	d = strings.TrimSuffix(d, ".")
	if ip, ok := parseIP(d); ok {
		if wildcard {
			return "", fmt.Errorf("%q: a wildcard needs a domain name, not an IP address", domain)
		}
		if ip.Zone() != "" {
			return "", fmt.Errorf("%q: an IP address with a zone is not allowed", domain)
		}
		return ip.String(), nil
	}
	if strings.Contains(d, ":") {
		return "", fmt.Errorf("%q: give the host name without a port", domain)
	}
	a, err := hostProfile.ToASCII(d)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid host name: %w", domain, err)
	}
	a = strings.ToLower(a)
	if strings.HasSuffix(a, ".") || strings.Contains(a, "..") || a == "" {
		return "", fmt.Errorf("%q is not a valid host name: empty label", domain)
	}
	if endsInNumber(a) {
		// Browsers and C resolvers read these as IPv4 addresses in octal,
		// hex or short form: "127.1" and "0x7f000001" are 127.0.0.1.
		return "", fmt.Errorf("%q looks like an IP address in a non-standard form", domain)
	}
	if wildcard {
		return "*." + a, nil
	}
	return a, nil
}

// parseIP accepts an IP literal, bare or in brackets.
func parseIP(s string) (netip.Addr, bool) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	ip, err := netip.ParseAddr(s)
	return ip, err == nil
}

// endsInNumber is the WHATWG URL rule for hosts that are IPv4 addresses:
// a last label that is all digits or 0x-hex. No top-level domain is.
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if l, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(l, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// ValidateNewDomain checks a domain a model asks to add and returns its
// canonical form. Beyond Canonical it requires a real, public host name:
// not an IP address, not localhost or another special-use name, a known
// top-level domain, and not a public suffix ("com", "co.uk",
// "github.io"). A wildcard must stand on a registrable domain:
// "*.example.com", never "*.com" or "*.github.io".
func ValidateNewDomain(domain string) (string, error) {
	c, err := Canonical(domain)
	if err != nil {
		return "", err
	}
	name := strings.TrimPrefix(c, "*.")
	if _, ok := parseIP(name); ok {
		return "", fmt.Errorf("%q is an IP address: only domain names can be added", domain)
	}
	if err := publicName(name); err != nil {
		return "", fmt.Errorf("%q %w", domain, err)
	}
	if _, err := publicsuffix.EffectiveTLDPlusOne(name); err != nil {
		return "", fmt.Errorf("%q is a public suffix (like \"com\" or \"github.io\"): it would allow every site under it", domain)
	}
	return c, nil
}

// publicName refuses canonical names that can only mean something inside
// a network. Its error reads after the name.
func publicName(name string) error {
	tld := name[strings.LastIndexByte(name, '.')+1:]
	if specialTLDs[tld] {
		return fmt.Errorf("is a special-use name (.%s), not a public host", tld)
	}
	if _, icann := publicsuffix.PublicSuffix(tld); !icann {
		return fmt.Errorf("has no known top-level domain (%q), so it is not a public host", tld)
	}
	return nil
}

// allowlist is a snapshot of the entries, for matching hosts. An entry
// maps to true when the operator seeded it.
type allowlist map[string]bool

func newAllowlist(entries []string, seeded map[string]bool) allowlist {
	a := make(allowlist, len(entries))
	for _, e := range entries {
		a[e] = seeded[e]
	}
	return a
}

// matches reports whether canonical host h is listed: exactly, or as a
// subdomain of a "*." entry. Only whole labels are compared, so
// "*.example.com" never matches "evil-example.com" nor example.com itself.
// A wildcard the operator did not seed stops at a public suffix:
// "*.amazonaws.com" does not list evil.s3.amazonaws.com, a site anyone
// can own under the public suffix s3.amazonaws.com.
func (a allowlist) matches(h string) bool {
	if _, ok := a[h]; ok {
		return true
	}
	if _, ok := parseIP(h); ok {
		return false
	}
	for i := strings.IndexByte(h, '.'); i >= 0; {
		rest := h[i+1:]
		if seeded, ok := a["*."+rest]; ok && (seeded || sameSite(h, rest)) {
			return true
		}
		j := strings.IndexByte(rest, '.')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return false
}

// sameSite reports whether h and base have the same registrable domain,
// that is, no public suffix lies between them.
func sameSite(h, base string) bool {
	hs, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil {
		return false
	}
	bs, err := publicsuffix.EffectiveTLDPlusOne(base)
	return err == nil && hs == bs
}
