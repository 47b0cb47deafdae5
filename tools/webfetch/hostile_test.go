package webfetch

import (
	"context"
	"encoding/json"
	"slices"
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
	notCanonical         = refuse
	metadataName         = refuse("instance-metadata service")
	spellsAddr           = refuse("spells the address")
	noDot                = refuse("has no dot")
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
		// names that can only be internal or only fail: refused, no human asked
		{"http://dev/", noDot},
		{"http://foo/containers/json", noDot},
		{"https://com/", noDot},
		{"http://metadata/computeMetadata/v1/", blocked},
		{"http://metadata.platformequinix.com/metadata", metadataName},
		{"http://metadata.packet.net/metadata", metadataName},
		{"http://metadata.tencentyun.com/latest/meta-data/", metadataName},
		{"http://metadata.goog/computeMetadata/v1/", metadataName},
		{"http://x.metadata.goog/", metadataName},
		{"https://api.metadata.cloud.ibm.com/metadata/v1/instance", metadataName},
		{"http://127.0.0.1.nip.io/", spellsAddr},
		{"http://169-254-169-254.sslip.io/latest/meta-data/", spellsAddr},
		{"http://10.0.0.1.xip.io/", spellsAddr},
		{"http://127-0-0-1.nip.io/", spellsAddr},
		{"http://0x7f000001.nip.io/", spellsAddr},
		{"http://7f000001.nip.io/", spellsAddr},
		{"http://magic-192-168-1-1.nip.io/", spellsAddr},
		{"http://0--1.sslip.io/", spellsAddr},
		{"http://app.127.0.0.1.traefik.me/", spellsAddr},
		{"http://a.b.10.0.0.1.example.com/", spellsAddr},
		{"http://100-100-100-200.example.com/", spellsAddr},
		{"http://app.localtest.me/", refuse("loopback")},
		// their public look-alikes are asked about as usual
		{"https://1.2.3.4.nip.io/", approve("1.2.3.4.nip.io")},
		{"https://0a000001.example.com/", approve("0a000001.example.com")},
		{"https://cafe--babe.example.com/", approve("cafe--babe.example.com")},
		{"https://metadata.example.com/", approve("metadata.example.com")},
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
		{"example.com", approve("Add example.com to")},
		{"EXAMPLE.COM.", approve("Add example.com to")},
		{"*.example.com", approve("Add *.example.com (every subdomain of example.com, not example.com itself)")},
		{"user.github.io", approve("Add user.github.io to")},
		// The approval names what is stored, in Unicode and punycode.
		{"bücher.de", approve("Add bücher.de (xn--bcher-kva.de) to")},
		{"BÜCHER.de", approve("Add bücher.de (xn--bcher-kva.de) to")},
		{"xn--bcher-kva.de", approve("Add bücher.de (xn--bcher-kva.de) to")},
		{"*.bücher.de", approve("Add *.bücher.de (*.xn--bcher-kva.de)")},
		{"exаmple.com", approve("Add exаmple.com (xn--exmple-4nf.com) to")}, // Cyrillic а
		// Written other than as stored: refused, never folded silently.
		{" example.com", notCanonical(`send "example.com" exactly`)},
		{"example.com" + strings.Repeat(" ", 4000), notCanonical(`send "example.com" exactly`)},
		{"example.com\n", notCanonical(`send "example.com" exactly`)},
		{"ｅxample.com", notCanonical(`domain "ｅxample.com" is not written in canonical form; send "example.com" exactly`)},
		{"ＥＸＡＭＰＬＥ.com", notCanonical(`send "example.com" exactly`)},
		{"example\u3002com", notCanonical(`send "example.com" exactly`)},                      // ideographic full stop
		{"\u212aelvin.com", notCanonical(`send "kelvin.com" exactly`)},                        // Kelvin sign
		{"\u0130nstagram.com", notCanonical("not written in canonical form")},                 // dotted capital I
		{"bu\u0308cher.de", notCanonical(`send "bücher.de" (or "xn--bcher-kva.de") exactly`)}, // decomposed ü
		{"ex\u00adample.com", notCanonical(`send "example.com" exactly`)},                     // soft hyphen, mapped away
		{"example.com..", invalidHost},
		// Names that can only lead inward.
		{"metadata.platformequinix.com", metadataName},
		{"metadata.packet.net", metadataName},
		{"metadata.tencentyun.com", metadataName},
		{"metadata.goog", metadataName},
		{"api.metadata.cloud.ibm.com", metadataName},
		{"*.metadata.goog", metadataName},
		{"127.0.0.1.nip.io", spellsAddr},
		{"*.127.0.0.1.nip.io", spellsAddr},
		{"169-254-169-254.sslip.io", spellsAddr},
		{"10.0.0.1.xip.io", spellsAddr},
		{"127-0-0-1.nip.io", spellsAddr},
		{"0x7f000001.nip.io", spellsAddr},
		{"7f000001.nip.io", spellsAddr},
		{"magic-c0a80101.nip.io", spellsAddr},
		{"0--1.sslip.io", spellsAddr},
		{"app-fd00-ec2--254.sslip.io", spellsAddr},
		{"app-192-168-1-1.example.com", spellsAddr},
		{"app.localtest.me", refuse("loopback")},
		{"lvh.me", refuse("loopback")},
		// Look-alikes of those that are ordinary public names.
		{"1.2.3.4.nip.io", approve("Add 1.2.3.4.nip.io to")},
		{"host-54-1-2-3.example.com", approve("Add host-54-1-2-3.example.com to")},
		{"0a000001.example.com", approve("Add 0a000001.example.com to")}, // hex is read only under nip.io and the like
		{"cafe--babe.example.com", approve("Add cafe--babe.example.com to")},
		{"metadata.example.com", approve("Add metadata.example.com to")},
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
		if tt.want.refused == "" {
			raw, _ := json.Marshal(in)
			req, err := add.Gate(context.Background(), raw)
			c, _ := Canonical(tt.domain)
			if err != nil || !req.Required || req.Reason != AddDomainReason(c) || !strings.Contains(req.Reason, tt.want.approval) {
				t.Errorf("add-domain %q: got %+v, %v; want approval naming %q", tt.domain, req, err, tt.want.approval)
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
	if !req.Required || !strings.Contains(req.Reason, "exаmple.com (xn--exmple-4nf.com)") {
		t.Fatalf("reason %q does not show the punycode form", req.Reason)
	}
}

// TestOperatorListIsTrusted: a dotless or internal host the operator
// listed stays reachable; a port on an entry opens that port alone.
func TestOperatorListIsTrusted(t *testing.T) {
	f, err := New(context.Background(), Config{
		Store: NewMemStore(),
		Seed:  []string{"localhost", "nas", "nas.local:5000", "nas.local:5001", "127.0.0.1:8080", "[::1]:8080", "router.lan:80"},
	})
	if err != nil {
		t.Fatal(err)
	}
	fetch := toolByName(t, f, ToolFetch)
	for _, tt := range []struct {
		url  string
		want verdict
	}{
		{"http://localhost/", listed},
		{"http://localhost:3000/", listed}, // no port on the entry: any port
		{"http://nas/", listed},
		{"http://nas:8443/", listed},
		{"http://nas.local:5000/", listed},
		{"https://nas.local:5001/", listed},
		{"http://nas.local/", refuse("opens nas.local on port 5000, 5001 only, not on port 80")},
		{"http://nas.local:22/", refuse("not on port 22")},
		{"http://127.0.0.1:8080/", listed},
		{"http://127.0.0.1:8081/", refuse("opens 127.0.0.1 on port 8080 only")},
		{"http://127.0.0.1/", refuse("not on port 80")},
		{"http://[::1]:8080/", listed},
		{"http://[::1]:22/", refuse("not on port 22")},
		{"http://router.lan/", listed},
		{"http://router.lan:8080/", refuse("not on port 8080")},
		{"http://dev/", noDot}, // not listed: the usual rules
		{"http://nas.local.nip.io/", approve("nas.local.nip.io")},
	} {
		checkVerdict(t, fetch, map[string]string{"url": tt.url}, tt.want)
	}
	for h, want := range map[string][]uint16{"localhost": nil, "nas.local": {5000, 5001}, "127.0.0.1": {8080}} {
		if ports, listed := f.operatorPorts(h); !listed || !slices.Equal(ports, want) {
			t.Errorf("operatorPorts(%q) = %v, %v; want %v, true", h, ports, listed, want)
		}
	}
	if _, listed := f.operatorPorts("example.com"); listed {
		t.Error("operatorPorts lists a host nobody listed")
	}
	// An entry without a port wins over one with.
	g, err := New(context.Background(), Config{Store: NewMemStore(), Seed: []string{"localhost:8080", "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	if ports, listed := g.operatorPorts("localhost"); !listed || ports != nil {
		t.Errorf("operatorPorts(localhost) = %v, %v; want any port", ports, listed)
	}
}

// TestAllowPrivateKeepsDotlessButNotMetadataNames: local development
// reaches internal names; metadata stays out of reach even then.
func TestAllowPrivateKeepsDotlessButNotMetadataNames(t *testing.T) {
	f, err := New(context.Background(), Config{Store: NewMemStore(), AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	fetch := toolByName(t, f, ToolFetch)
	for _, tt := range []struct {
		url  string
		want verdict
	}{
		{"http://dev/", approve("dev")},
		{"http://127.0.0.1.nip.io:3000/", approve("127.0.0.1.nip.io")},
		{"http://169-254-169-254.sslip.io/", spellsAddr},
		{"http://metadata.tencentyun.com/", metadataName},
		{"http://metadata/", metadataName},
	} {
		checkVerdict(t, fetch, map[string]string{"url": tt.url}, tt.want)
	}
}

// TestAddDomainInvokeNeedsApproval: the gate asks a human; invoke checks
// again that one did, should it ever be reached without.
func TestAddDomainInvokeNeedsApproval(t *testing.T) {
	st := NewMemStore()
	f, err := New(context.Background(), Config{Store: st, Seed: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	add := toolByName(t, f, ToolAddDomain)
	in := json.RawMessage(`{"domain":"docs.example.org"}`)
	for name, ctx := range map[string]context.Context{
		"no call":      context.Background(),
		"not approved": prompt.ContextWithCall(context.Background(), prompt.CallInfo{PromptID: "p", CallID: "c"}),
	} {
		if out, err := add.Invoke(ctx, in); err == nil || !strings.Contains(err.Error(), "not approved") {
			t.Errorf("%s: %q, %v; want a refusal", name, out, err)
		}
	}
	if d, _ := st.Domains(context.Background()); len(d) != 0 {
		t.Fatalf("added without approval: %v", d)
	}
	// Nothing to change needs no approval.
	if out, err := add.Invoke(context.Background(), json.RawMessage(`{"domain":"example.com"}`)); err != nil || !strings.Contains(out, "nothing changed") {
		t.Errorf("already listed: %q, %v", out, err)
	}
	approved := prompt.ContextWithCall(context.Background(), prompt.CallInfo{Approved: true, ApprovedBy: "Alice (111)"})
	// Invoke checks the written form again, approval or not.
	if out, err := add.Invoke(approved, json.RawMessage(`{"domain":"ｅxample.org"}`)); err == nil || !strings.Contains(err.Error(), "canonical form") {
		t.Errorf("full-width input: %q, %v; want a refusal", out, err)
	}
	if out, err := add.Invoke(approved, in); err != nil || out != "Added docs.example.org to the allowlist." {
		t.Fatalf("approved: %q, %v", out, err)
	}
	if by, _ := st.AddedBy("docs.example.org"); by != "Alice (111)" {
		t.Errorf("added by %q; want the approver", by)
	}
}
