package llm

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

var wireRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestWireNameExamples(t *testing.T) {
	for name, want := range map[string]string{
		"web-fetch.fetch": "web-fetch__fetch",
		"fetch":           "fetch",
		"a-b-c":           "a-b-c",
		"my_tool":         "my_-tool",
		"a.b.c":           "a__b__c",
		"a._b":            "a___-b",
		"_":               "_-",
		".":               "__",
		"__":              "_-_-",
		"-_-.":            "-_--__",
		"Zz09":            "Zz09",
	} {
		got, err := WireName(name)
		if err != nil || got != want {
			t.Errorf("WireName(%q) = %q, %v; want %q", name, got, err, want)
		}
		back, ok := ToolName(got)
		if !ok || back != name {
			t.Errorf("ToolName(%q) = %q, %v; want %q", got, back, ok, name)
		}
	}
}

// Every name over a small alphabet that has all the special characters,
// up to length 6: distinct names get distinct wire names, each valid for
// the API, each decoding back to its name.
func TestWireNameIsInjectiveAndReversible(t *testing.T) {
	alphabet := []string{"a", "Z", "0", "_", ".", "-"}
	names := []string{""}
	seen := map[string]string{}
	for n := 1; n <= 6; n++ {
		var next []string
		for _, prefix := range names {
			for _, c := range alphabet {
				next = append(next, prefix+c)
			}
		}
		names = next
		for _, name := range names {
			checkRoundTrip(t, name, seen)
		}
	}
	if want := 6 + 36 + 216 + 1296 + 7776 + 46656; len(seen) != want {
		t.Fatalf("checked %d names, want %d", len(seen), want)
	}
}

func TestWireNameRandomLongNames(t *testing.T) {
	const chars = "abcxyzABC0129_.-"
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]string{}
	for range 20000 {
		b := make([]byte, 1+rng.IntN(40))
		for i := range b {
			b[i] = chars[rng.IntN(len(chars))]
		}
		checkRoundTrip(t, string(b), seen)
	}
}

func checkRoundTrip(t *testing.T, name string, seen map[string]string) {
	t.Helper()
	wire, err := WireName(name)
	if err != nil {
		if len(name) <= 32 {
			t.Fatalf("WireName(%q): %v", name, err)
		}
		return // a long name may not fit once encoded
	}
	if !wireRE.MatchString(wire) {
		t.Fatalf("WireName(%q) = %q, not valid for the API", name, wire)
	}
	if other, dup := seen[wire]; dup && other != name {
		t.Fatalf("%q and %q share the wire name %q", name, other, wire)
	}
	seen[wire] = name
	back, ok := ToolName(wire)
	if !ok || back != name {
		t.Fatalf("ToolName(WireName(%q)) = %q, %v", name, back, ok)
	}
}

func TestWireNameRefuses(t *testing.T) {
	for _, name := range []string{
		"",
		"has space",
		"slash/name",
		"ünïcode",
		strings.Repeat("a", 65),
		strings.Repeat("a.", 22), // 44 characters, 66 once encoded
	} {
		if wire, err := WireName(name); err == nil {
			t.Errorf("WireName(%q) = %q, want an error", name, wire)
		}
	}
	if _, err := WireName(strings.Repeat("a", 64)); err != nil {
		t.Errorf("64 plain characters: %v", err)
	}
}

// Names the model invents need not decode: they are not ours.
func TestToolNameRefusesWhatNoNameEncodesTo(t *testing.T) {
	for _, wire := range []string{"", "made_up", "trailing_", "web.fetch", "a b", "x_y_z"} {
		if name, ok := ToolName(wire); ok {
			t.Errorf("ToolName(%q) = %q, true; want false", wire, name)
		}
	}
}

func TestSanitizeNameMakesAnyStringValid(t *testing.T) {
	for _, s := range []string{"", "get weather", "ünï", strings.Repeat("x", 100), "ok_name-1"} {
		if got := sanitizeName(s); !wireRE.MatchString(got) {
			t.Errorf("sanitizeName(%q) = %q, not valid", s, got)
		}
	}
}

func FuzzWireName(f *testing.F) {
	for _, s := range []string{"web-fetch.fetch", "a_b", "._-", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		wire, err := WireName(name)
		if err != nil {
			return
		}
		if !wireRE.MatchString(wire) {
			t.Fatalf("WireName(%q) = %q, not valid", name, wire)
		}
		if back, ok := ToolName(wire); !ok || back != name {
			t.Fatalf("ToolName(WireName(%q)) = %q, %v", name, back, ok)
		}
	})
}

func BenchmarkWireName(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		w, _ := WireName("web-fetch.fetch")
		if _, ok := ToolName(w); !ok {
			b.Fatal("no round trip")
		}
	}
}
