package webfetch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"tollgate/prompt"
)

// verdict is what a gate must answer for one input.
type verdict struct {
	listed   bool   // no approval needed
	approval string // approval needed; the reason must name this host
	refused  string // gate error containing this; no human is asked
}

var (
	listed               = verdict{listed: true}
	approve              = func(host string) verdict { return verdict{approval: host} }
	refuse               = func(why string) verdict { return verdict{refused: why} }
	userInfo             = refuse("user-info")
	blocked              = refuse("destination not allowed")
	notStandard          = refuse("non-standard form")
	schemeRefused        = refuse("only http and https")
	publicSuffixVerdict  = refuse("public suffix")
	ipVerdict            = refuse("is an IP address")
	specialName          = refuse("special-use name")
	unknownTLD           = refuse("no known top-level domain")
	wildcardVerdict      = refuse("wildcard")
	invalidHost          = refuse("not a valid host name")
	notAHostName         = refuse("not a host name")
	cannotHaveHostVerdit = refuse("has no host")
)

func toolByName(t *testing.T, f *Fetcher, name string) *prompt.Tool {
	t.Helper()
	for _, tool := range f.Tools() {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func checkVerdict(t *testing.T, tool *prompt.Tool, input any, want verdict) {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	req, err := tool.Gate(context.Background(), raw)
	switch {
	case want.refused != "":
		if err == nil || !strings.Contains(err.Error(), want.refused) {
			t.Errorf("%s %s: got %+v, %v; want refusal containing %q", tool.Name, raw, req, err, want.refused)
		}
	case err != nil:
		t.Errorf("%s %s: unexpected gate error %v", tool.Name, raw, err)
	case want.listed:
		if req.Required {
			t.Errorf("%s %s: approval asked (%q); want listed", tool.Name, raw, req.Reason)
		}
	default:
		if !req.Required || !strings.Contains(req.Reason, `"`+want.approval+`"`) {
			t.Errorf("%s %s: got %+v; want approval naming %q", tool.Name, raw, req, want.approval)
		}
	}
}

// TestHostileURLs is the table of tricks a model (or a page it read) might
// use to reach something it should not, with the verdict of the fetch gate.
func TestHostileURLs(t *testing.T) {
	f, err := New(context.Background(), Config{
		Store: NewMemStore(),
		Seed:  []string{"example.com", "*.docs.example.org"},
	})
	if err != nil {
		t.Fatal(err)
	}
	fetch := toolByName(t, f, ToolFetch)
	tests := []struct {
		url  string
		want verdict
	}{
		{"https://example.com/", listed},
		{"HTTPS://EXAMPLE.COM/Path", listed},
		{"https://example.com./", listed},                          // trailing dot
		{"https://example.com:443/", listed},                       // explicit default port
		{"https://ＥＸＡＭＰＬＥ.com/", listed},                           // full-width letters map to example.com
		{"https://a.docs.example.org/x", listed},                   // wildcard subdomain
		{"https://docs.example.org/", approve("docs.example.org")}, // wildcard excludes its apex
		{"https://example.com../", invalidHost},
		// user-info tricks
		{"https://user@example.com/", userInfo},
		{"https://user:pass@example.com/", userInfo},
		{"https://example.com@evil.com/", userInfo},
		{"https://example.com:443@evil.com/", userInfo},
		{`https://evil.com\@example.com/`, refuse("invalid URL")},
		// fragments and ?@: the host is what precedes them
		{"https://evil.com#@example.com/", approve("evil.com")},
		{"https://evil.com?@example.com/", approve("evil.com")},
		// look-alikes
		{"https://evil-example.com/", approve("evil-example.com")},
		{"https://example.com.evil.net/", approve("example.com.evil.net")},
		{"https://notexample.com/", approve("notexample.com")},
		{"https://exаmple.com/", approve("xn--exmple-4nf.com")}, // Cyrillic а: shown as punycode
		{"https://xn--exmple-4nf.com/", approve("xn--exmple-4nf.com")},
		{"https://example%2ecom/", refuse("invalid URL")},
		// IPv4 in other notations
		{"http://2130706433/", notStandard},
		{"http://0x7f000001/", notStandard},
		{"http://0177.0.0.1/", notStandard},
		{"http://127.1/", notStandard},
		{"http://0x7f.0.0.1/", notStandard},
		{"http://127.0.0.1/", blocked},
		{"http://127.0.0.1./", blocked},
		{"http://10.0.0.1/", blocked},
		{"http://192.168.1.1/", blocked},
		{"http://100.64.0.1/", blocked}, // CGNAT
		{"http://0.0.0.0/", blocked},
		{"http://224.0.0.1/", blocked},
		// IPv6 loopback and mapped forms
		{"http://[::1]/", blocked},
		{"http://[0:0:0:0:0:0:0:1]/", blocked},
		{"http://[::]/", blocked},
		{"http://[::ffff:127.0.0.1]/", blocked},
		{"http://[::ffff:7f00:1]/", blocked},
		{"http://[64:ff9b::7f00:1]/", blocked}, // NAT64 of 127.0.0.1
		{"http://[fc00::1]/", blocked},
		{"http://[fe80::1%25eth0]/", refuse("zone")},
		// cloud metadata
		{"http://169.254.169.254/latest/meta-data/", blocked},
		{"http://[fd00:ec2::254]/", blocked},
		{"http://100.100.100.200/", blocked},
		{"http://168.63.129.16/", blocked}, // Azure WireServer: a public address
		{"http://192.0.0.192/", blocked},   // Oracle
		{"http://[fd00:ec2::23]/", blocked},
		{"http://[fd20:ce::254]/", blocked},
		{"http://[64:ff9b::a83f:8110]/", blocked}, // NAT64 of the WireServer
		{"http://metadata.google.internal/", blocked},
		{"http://localhost/", blocked},
		{"http://app.localhost/", blocked},
		{"http://printer.local/", blocked},
		// schemes
		{"ftp://example.com/", schemeRefused},
		{"file:///etc/passwd", schemeRefused},
		{"gopher://example.com:70/", schemeRefused},
		{"javascript:alert(1)", schemeRefused},
		{"data:text/html,hi", schemeRefused},
		{"//example.com/", schemeRefused},
		{"example.com", schemeRefused},
		{"http:example.com", cannotHaveHostVerdit},
		{"https:///path", cannotHaveHostVerdit},
		// ports
		{"https://example.com:8443/", blocked},
		{"http://example.com:22/", blocked},
		{"http://example.com:0/", refuse("invalid port")},
		{"http://example.com:99999/", refuse("invalid port")},
		{"https://8.8.8.8:25/", blocked},
		{"https://8.8.8.8/", approve("8.8.8.8")},
	}
	for _, tt := range tests {
		checkVerdict(t, fetch, map[string]string{"url": tt.url}, tt.want)
	}
}

// TestHostileDomains is the table for add-domain: everything refused is
// refused by the gate, before a human is asked.
func TestHostileDomains(t *testing.T) {
	f, err := New(context.Background(), Config{Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	add := toolByName(t, f, ToolAddDomain)
	tests := []struct {
		domain string
		want   verdict
	}{
		{"example.com", verdict{}},
		{"EXAMPLE.COM.", verdict{}},
		{"*.example.com", verdict{}},
		{"user.github.io", verdict{}},
		{"bücher.de", verdict{}},
		{"com", publicSuffixVerdict},
		{"co.uk", publicSuffixVerdict},
		{"github.io", publicSuffixVerdict},
		{"*.com", publicSuffixVerdict},
		{"*.co.uk", publicSuffixVerdict},
		{"*.github.io", publicSuffixVerdict},
		{"localhost", specialName},
		{"app.localhost", specialName},
		{"metadata.google.internal", specialName},
		{"router.lan", unknownTLD},
		{"x.onion", specialName},
		{"1.0.0.127.in-addr.arpa", specialName},
		{"127.0.0.1", ipVerdict},
		{"[::1]", ipVerdict},
		{"::ffff:127.0.0.1", ipVerdict},
		{"169.254.169.254", ipVerdict},
		{"2130706433", notStandard},
		{"0x7f000001", notStandard},
		{"127.1", notStandard},
		{"https://example.com", refuse("is a URL")},
		{"example.com/path", notAHostName},
		{"example.com:443", refuse("without a port")},
		{"user@example.com", notAHostName},
		{"example%2ecom", notAHostName},
		{"*", wildcardVerdict},
		{"*example.com", wildcardVerdict},
		{"a.*.example.com", wildcardVerdict},
		{"", refuse("empty")},
		{"example..com", invalidHost},
		{"exa_mple.com", invalidHost},
	}
	for _, tt := range tests {
		in := map[string]string{"domain": tt.domain}
		if tt.want == (verdict{}) {
			raw, _ := json.Marshal(in)
			req, err := add.Gate(context.Background(), raw)
			if err != nil || !req.Required || !strings.HasPrefix(req.Reason, AddDomainReason) {
				t.Errorf("add-domain %q: got %+v, %v; want approval with the static reason", tt.domain, req, err)
			}
			continue
		}
		checkVerdict(t, add, in, tt.want)
	}
}

// TestAddDomainReasonShowsPunycode: a human approving a Unicode name must
// see the form that will really be stored, so a homograph cannot pass as
// the name it imitates.
func TestAddDomainReasonShowsPunycode(t *testing.T) {
	f, err := New(context.Background(), Config{Store: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	req, err := toolByName(t, f, ToolAddDomain).Gate(context.Background(), json.RawMessage(`{"domain":"exаmple.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !req.Required || !strings.Contains(req.Reason, `"xn--exmple-4nf.com"`) {
		t.Fatalf("reason %q does not show the punycode form", req.Reason)
	}
}
