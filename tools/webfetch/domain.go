package webfetch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"code.dny.dev/ssrf"
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
// "github.io"), and not a name that can only lead inward: a cloud
// metadata service's name, or one that spells a private, loopback or
// metadata address ("127.0.0.1.nip.io"). A wildcard must stand on a
// registrable domain: "*.example.com", never "*.com" or "*.github.io".
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
	if err := inwardName(name, notPublicAddr); err != nil {
		return "", fmt.Errorf("%q %w", domain, err)
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
// maps to true when it is on the operator's list.
type allowlist map[string]bool

func newAllowlist(added []string, operator map[string][]uint16) allowlist {
	a := make(allowlist, len(added)+len(operator))
	for _, e := range added {
		a[e] = false
	}
	for e := range operator {
		a[e] = true
	}
	return a
}

// matches reports whether canonical host h is listed: exactly, or as a
// subdomain of a "*." entry. Only whole labels are compared, so
// "*.example.com" never matches "evil-example.com" nor example.com itself.
// A wildcard the operator did not list stops at a public suffix:
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
		if operator, ok := a["*."+rest]; ok && (operator || sameSite(h, rest)) {
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

// Display returns canonical domain c as a human should read it before
// approving it: the Unicode form, followed by the stored punycode form in
// parentheses where the two differ ("bücher.example
// (xn--bcher-kva.example)"), so a name that imitates another is seen for
// what it is.
func Display(c string) string {
	u := unicodeForm(c)
	if u == c {
		return c
	}
	return u + " (" + c + ")"
}

// unicodeForm is canonical c with its A-labels decoded; c itself when it
// has none or they do not decode.
func unicodeForm(c string) string {
	if !strings.Contains(c, "xn--") {
		return c
	}
	name, wildcard := strings.CutPrefix(c, "*.")
	u, err := hostProfile.ToUnicode(name)
	if err != nil {
		return c
	}
	if wildcard {
		return "*." + u
	}
	return u
}

// checkWritten refuses a domain whose canonical form c differs from what
// was written other than by ASCII letter case and one trailing dot. What a
// human approves must be what is stored: padding, full-width or other
// compatibility letters, decomposed accents and the like fold silently
// into another name, and a human reading the written text (perhaps cut
// off into an attachment) would not see which. A Unicode name is fine
// when written in its normal form: it is shown with its punycode form.
func checkWritten(written, c string) error {
	w := strings.TrimSuffix(written, ".")
	var b strings.Builder
	for _, r := range w {
		switch {
		case 'A' <= r && r <= 'Z':
			r += 'a' - 'A'
		case r >= utf8.RuneSelf && unicode.ToLower(r) < utf8.RuneSelf:
			// The Kelvin sign and the dotted capital I lower-case to ASCII
			// letters: imitations, not case.
			r = utf8.RuneError
		case r >= utf8.RuneSelf:
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	if l := b.String(); l == c || l == unicodeForm(c) {
		return nil
	}
	want := fmt.Sprintf("%q", unicodeForm(c))
	if u := unicodeForm(c); u != c {
		want += fmt.Sprintf(" (or %q)", c)
	}
	return fmt.Errorf("domain %q is not written in canonical form; send %s exactly", written, want)
}

// parseOperatorEntry reads one entry of the operator's list: a host in any
// form Canonical takes, optionally followed by ":port" ("localhost:8080",
// "[::1]:8080", "nas.local:5000"). port is 0 when none is given. A port
// only opens something for an internal host (an IP literal or a name
// outside the public DNS), whose ports are not otherwise checked; a
// public host is fetched on 80 and 443 alone, so a port there is refused
// rather than silently ignored.
func parseOperatorEntry(s string) (host string, port uint16, err error) {
	s = strings.TrimSpace(s)
	if c, err := Canonical(s); err == nil {
		return c, 0, nil
	}
	h, p := s, ""
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		if hh, pp, err := net.SplitHostPort(s); err == nil {
			h, p = hh, pp
		}
	}
	if p == "" {
		_, err := Canonical(s)
		return "", 0, err
	}
	c, err := Canonical(h)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("invalid port %q", p)
	}
	if strings.HasPrefix(c, "*.") {
		return "", 0, errors.New("a port can only follow a single host, not a wildcard")
	}
	if !isInternal(c) {
		return "", 0, fmt.Errorf("a port can only follow an internal host (localhost, an IP address, a name such as nas.local); %s is fetched on ports 80 and 443 only", c)
	}
	return c, uint16(n), nil
}

// metadataHosts are the names of cloud providers' instance-metadata
// services (credentials!), with the provider. Some resolve to a
// link-local address the connect-time check refuses anyway; others
// (Equinix, Packet) are public addresses that answer with the caller's
// secrets, so only the name gives them away. A subdomain counts too.
var metadataHosts = map[string]string{
	"metadata":                     "Google Cloud",
	"metadata.google.internal":     "Google Cloud",
	"metadata.goog":                "Google Cloud",
	"instance-data":                "AWS",
	"instance-data.ec2.internal":   "AWS",
	"api.metadata.cloud.ibm.com":   "IBM Cloud",
	"metadata.platformequinix.com": "Equinix Metal",
	"metadata.packet.net":          "Equinix Metal (Packet)",
	"metadata.tencentyun.com":      "Tencent Cloud",
}

// loopbackDomains resolve, with every name under them, to 127.0.0.1.
var loopbackDomains = map[string]bool{"localtest.me": true, "lvh.me": true, "vcap.me": true, "localho.st": true}

// addressDomains answer any name that spells an address with that address
// (wildcard DNS for testing): also in hex ("7f000001.nip.io") and, for
// sslip.io, IPv6 ("--1.sslip.io"). Elsewhere hex and IPv6 spellings are
// not read, as ordinary labels ("cafe--babe", a commit hash) look alike.
var addressDomains = map[string]bool{"nip.io": true, "sslip.io": true, "xip.io": true, "traefik.me": true}

// underAny returns the entry of set that is name or one of its parent
// domains, or "".
func underAny[V any](name string, set map[string]V) string {
	for n := name; ; {
		if _, ok := set[n]; ok {
			return n
		}
		i := strings.IndexByte(n, '.')
		if i < 0 {
			return ""
		}
		n = n[i+1:]
	}
}

// inwardName refuses a canonical host name (not an IP literal) that can
// only lead to a metadata service or to an address inward reports as not
// to be reached: a known metadata name, a name under a domain that
// resolves everything to loopback, or a name that spells such an address
// ("127.0.0.1.nip.io", "169-254-169-254.sslip.io", "0x7f000001.nip.io").
// Asking a human about these can only end in an error, or worse. Its
// error reads after the name.
func inwardName(name string, inward func(netip.Addr) bool) error {
	if m := underAny(name, metadataHosts); m != "" {
		return fmt.Errorf("is the instance-metadata service of %s (%s), which web-fetch never reaches", metadataHosts[m], m)
	}
	if d := underAny(name, loopbackDomains); d != "" && inward(netip.AddrFrom4([4]byte{127, 0, 0, 1})) {
		return fmt.Errorf("resolves to the loopback address 127.0.0.1 (every name under %s does), which web-fetch does not reach", d)
	}
	for _, ip := range spelledAddrs(name, underAny(name, addressDomains) != "") {
		if inward(ip) {
			return fmt.Errorf("spells the address %s, and names like it (nip.io, sslip.io) resolve to that address: "+
				"a private, loopback or metadata address, which web-fetch does not reach", ip)
		}
	}
	return nil
}

// spelledAddrs returns the IPv4 addresses canonical name spells in four
// decimal labels ("10.0.0.1.example") or four dash-separated decimal
// parts of one label ("app-10-0-0-1.example"), or as "0x" and eight hex
// digits. With wildcardDNS it also reads eight hex digits without "0x"
// and sslip.io's IPv6 form (colons as dashes).
func spelledAddrs(name string, wildcardDNS bool) []netip.Addr {
	var out []netip.Addr
	labels := strings.Split(name, ".")
	out = append(out, fourOctets(labels)...)
	for _, l := range labels {
		parts := strings.Split(l, "-")
		out = append(out, fourOctets(parts)...)
		for _, p := range parts {
			h, has0x := strings.CutPrefix(p, "0x")
			if (has0x || wildcardDNS) && len(h) == 8 && strings.Trim(h, "0123456789abcdef") == "" {
				n, _ := strconv.ParseUint(h, 16, 32)
				out = append(out, netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}))
			}
		}
		if wildcardDNS && strings.Contains(l, "-") && !strings.HasPrefix(l, "xn--") {
			// "--1" is ::1; a prefix ("app-") may precede the address.
			for i := 0; i >= 0 && i < len(l); {
				if ip, err := netip.ParseAddr(strings.ReplaceAll(l[i:], "-", ":")); err == nil && ip.Is6() {
					out = append(out, ip)
				}
				j := strings.IndexByte(l[i:], '-')
				if j < 0 {
					break
				}
				i += j + 1
			}
		}
	}
	return out
}

// fourOctets returns the addresses spelled by any four consecutive
// elements of parts that are decimal numbers up to 255.
func fourOctets(parts []string) []netip.Addr {
	var out []netip.Addr
	for i := 0; i+4 <= len(parts); i++ {
		var b [4]byte
		ok := true
		for k, p := range parts[i : i+4] {
			n, err := strconv.ParseUint(p, 10, 8)
			if err != nil || p == "" || strings.Trim(p, "0123456789") != "" {
				ok = false
				break
			}
			b[k] = byte(n)
		}
		if ok {
			out = append(out, netip.AddrFrom4(b))
		}
	}
	return out
}

// notPublicAddr is the strictest reading of an address: anything but a
// public unicast address is inward. ValidateNewDomain uses it, having no
// Fetcher whose settings could say otherwise.
func notPublicAddr(ip netip.Addr) bool {
	return ssrf.New().SafeAddr(ip) != nil || checkMetadata(netip.AddrPortFrom(ip, 443)) != nil
}
