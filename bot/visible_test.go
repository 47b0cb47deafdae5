package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
)

// hiddenSamples are characters that break a line or draw nothing (or draw
// like another character), by class: each must reach the chat only as its
// marker, wherever a request shows it.
var hiddenSamples = []struct {
	class string
	runes []rune
}{
	{"Cc", []rune{0x07, '\t', '\r', 0x0B, 0x0C, 0x1B, 0x7F, 0x85}},
	{"Cf", []rune{0x200B, 0x200C, 0x200D, 0x202E, 0x2066, 0x200F, 0x061C, 0xFEFF, 0x00AD, 0x180E, 0x2060, 0x2064, 0xE0041, 0xFFF9}},
	{"Zl Zp", []rune{0x2028, 0x2029}},
	{"Zs but space", []rune{0x00A0, 0x1680, 0x2000, 0x2007, 0x200A, 0x202F, 0x205F, 0x3000}},
	{"draws blank", []rune{0x3164, 0x2800, 0x115F, 0x1160, 0xFFA0, 0x034F, 0x17B4, 0x1D159, 0x16FE4}},
	{"variation selector", []rune{0xFE0F, 0xFE00, 0x180B, 0xE0100}},
	{"Co Cn", []rune{0xE000, 0xF8FF, 0x0378, 0xFFFF, 0x10FFFF}},
}

// requestWith puts s in one place of a request that a model or a tool
// can fill.
var requestWith = map[string]func(s string) prompt.ApprovalRequest{
	"tool name": func(s string) prompt.ApprovalRequest {
		return prompt.ApprovalRequest{ApprovalID: "a1", ToolName: s, Input: json.RawMessage(`{}`)}
	},
	"reason": func(s string) prompt.ApprovalRequest {
		return prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "t", Reason: s, Input: json.RawMessage(`{}`)}
	},
	"input value": func(s string) prompt.ApprovalRequest {
		return prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "t", Input: json.RawMessage(`{"k":"` + s + `"}`)}
	},
	"input key": func(s string) prompt.ApprovalRequest {
		return prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "t", Input: json.RawMessage(`{"` + s + `":1}`)}
	},
	"queued name": func(s string) prompt.ApprovalRequest {
		return prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "t", Input: json.RawMessage(`{}`),
			Queued: []prompt.ToolCall{{Name: s, Arguments: `{}`}}}
	},
	"queued arguments": func(s string) prompt.ApprovalRequest {
		return prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "t", Input: json.RawMessage(`{}`),
			Queued: []prompt.ToolCall{{Name: "q", Arguments: `{"k":"` + s + `"}`}}}
	},
}

// shownPlain renders req and returns what the chat shows, failing if
// Telegram would refuse it.
func shownPlain(t *testing.T, req prompt.ApprovalRequest) (approvalView, string, []models.MessageEntity) {
	t.Helper()
	view := renderApproval(req)
	plain, ents, err := telegramtest.ParseHTML(view.HTML)
	if err != nil {
		t.Fatalf("Telegram would refuse it: %v\n%s", err, view.HTML)
	}
	return view, plain, ents
}

func TestEveryHiddenCharacterIsMarkedEverywhere(t *testing.T) {
	for _, class := range hiddenSamples {
		for _, r := range class.runes {
			for place, mk := range requestWith {
				_, plain, _ := shownPlain(t, mk("x"+string(r)+"y"))
				if want := "x" + marker(r) + "y"; !strings.Contains(plain, want) {
					t.Errorf("%s %U in %s: %q not in\n%s", class.class, r, place, want, plain)
				}
				if strings.ContainsRune(plain, r) {
					t.Errorf("%s %U in %s: shown raw", class.class, r, place)
				}
			}
		}
	}
}

func TestOneLineValuesCannotBreakALine(t *testing.T) {
	for place, mk := range requestWith {
		if strings.HasPrefix(place, "input") {
			continue // a raw newline is not JSON there; see the test below
		}
		view, plain, _ := shownPlain(t, mk("x\n✅ Approved\r\ny"))
		if !strings.Contains(plain, "x[U+000A]✅ Approved[U+000D][U+000A]y") {
			t.Errorf("%s: newline not marked:\n%s", place, plain)
		}
		base, _, _ := shownPlain(t, mk("x"))
		if got, want := strings.Count(plain, "\n"), strings.Count(base.HTML, "\n"); got != want {
			t.Errorf("%s: %d lines, want %d:\n%s", place, got+1, want+1, view.HTML)
		}
	}
}

// A marker is only ever a marker: text that spells one is marked itself,
// so that it cannot stand for a character the input does not hold.
func TestLiteralMarkerTextIsNotAMarker(t *testing.T) {
	for place, mk := range requestWith {
		_, plain, _ := shownPlain(t, mk("[U+202E]"))
		if !strings.Contains(plain, "[U+005B]U+202E]") {
			t.Errorf("%s: literal marker shown as a marker:\n%s", place, plain)
		}
	}
}

func TestInvalidUTF8IsMarkedAsWhatTheToolReads(t *testing.T) {
	for place, mk := range requestWith {
		view, plain, _ := shownPlain(t, mk("a\xffb"))
		if !utf8.ValidString(view.HTML) {
			t.Errorf("%s: HTML is not UTF-8", place)
		}
		if !strings.Contains(plain, "a[U+FFFD]b") {
			t.Errorf("%s: bad byte not marked:\n%s", place, plain)
		}
	}
}

func TestInputNewlinesAreOnlyThePrettyPrinters(t *testing.T) {
	for name, tc := range map[string]struct{ raw, pre string }{
		// JSON allows whitespace after the value, and json.Indent keeps it.
		"trailing whitespace": {"{\"a\":1}\n\n \r\n\t", "{\n  \"a\": 1\n}"},
		"leading whitespace":  {"\r\n {\"a\":1}", "{\n  \"a\": 1\n}"},
		// An escaped newline is content, shown as its escape.
		"escaped newline": {`{"a":"x\ny"}`, "{\n  \"a\": \"x\\ny\"\n}"},
		// A separator is legal raw inside a JSON string.
		"raw separator": {"{\"a\":\"x\u2028\u2029y\u0085\"}", "{\n  \"a\": \"x[U+2028][U+2029]y[U+0085]\"\n}"},
		// Not JSON: no newline in it is the pretty-printer's.
		"not JSON": {"{\"a\":\"x\ny\"}", "{\"a\":\"x[U+000A]y\"}"},
	} {
		_, plain, ents := shownPlain(t, prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "t", Input: json.RawMessage(tc.raw)})
		if got := entityText(plain, ents, models.MessageEntityTypePre); got != tc.pre {
			t.Errorf("%s: input shown as %q, want %q", name, got, tc.pre)
		}
	}
}

// entityText is the text of the first entity of type typ.
func entityText(plain string, ents []models.MessageEntity, typ models.MessageEntityType) string {
	u := utf16.Encode([]rune(plain))
	for _, e := range ents {
		if e.Type == typ {
			return string(utf16.Decode(u[e.Offset : e.Offset+e.Length]))
		}
	}
	return ""
}

func TestLongInputDocumentIsMarkedAndAnnounced(t *testing.T) {
	long := strings.Repeat("y", 5000)
	in := "{\"cmd\":\"rm\u202E\u2028" + long + "\u3164[U+200B]\"}\n"
	view, plain, _ := shownPlain(t, prompt.ApprovalRequest{ApprovalID: "id1", ToolName: "t", Input: json.RawMessage(in)})
	if view.Document == nil {
		t.Fatal("no document")
	}
	want := "{\n  \"cmd\": \"rm[U+202E][U+2028]" + long + "[U+3164][U+005B]U+200B]\"\n}"
	if string(view.Document) != want {
		t.Errorf("document %.80q…, want the marked input", view.Document)
	}
	// The literal "[U+" is marked but is not a hidden character.
	if !strings.Contains(plain, "It holds 3 hidden or line-breaking characters, each shown as its code point in brackets.") {
		t.Errorf("message does not say the document hides characters:\n%s", plain)
	}
	if !strings.Contains(plain, fmt.Sprintf("Input: %d characters", len(want))) {
		t.Errorf("message does not count the document as sent:\n%s", plain)
	}
	clean, plain, _ := shownPlain(t, prompt.ApprovalRequest{ApprovalID: "id1", ToolName: "t", Input: json.RawMessage(`{"cmd":"` + long + `[U+200B]"}`)})
	if strings.Contains(plain, "hidden") {
		t.Errorf("message says a document without hidden characters has some:\n%s", plain)
	}
	if clean.Document == nil || !strings.Contains(string(clean.Document), long+"[U+005B]U+200B]") {
		t.Error("document is not the whole input")
	}
}

func TestCutNeverSplitsAMarker(t *testing.T) {
	name := "a" + strings.Repeat("\u200B", 10)
	_, plain, _ := shownPlain(t, prompt.ApprovalRequest{ApprovalID: "a1", ToolName: name, Input: json.RawMessage(`{}`)})
	if want := "Tool: a" + strings.Repeat("[U+200B]", 7) + "… (11 characters in all)"; !strings.Contains(plain, want) {
		t.Errorf("tool line not %q:\n%s", want, plain)
	}
}

// notHidden is what the chat may show raw: letters, marks, numbers,
// punctuation, symbols and the plain space, less what Unicode calls
// default-ignorable and what fonts draw empty. It is written from the
// categories, apart from isInvisible, so that each checks the other.
func notHidden(r rune) bool {
	if r == ' ' {
		return true
	}
	if !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) {
		return false
	}
	return !unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) &&
		r != 0x2800 && r != 0x1D159 && r != 0x16FE4
}

var markerRE = regexp.MustCompile(`\[U\+([0-9A-F]{4,6})\]`)

// unmark reads shown text back to the text it shows, failing on a "[U+"
// that is not a whole marker.
func unmark(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for {
		i := strings.Index(s, "[U+")
		if i < 0 {
			return b.String() + s
		}
		m := markerRE.FindStringSubmatchIndex(s[i:])
		if m == nil || m[0] != 0 {
			t.Fatalf("%q is not a marker", s[i:min(len(s), i+10)])
		}
		r, _ := strconv.ParseUint(s[i+m[2]:i+m[3]], 16, 32)
		b.WriteString(s[:i])
		b.WriteRune(rune(r))
		s = s[i+m[1]:]
	}
}

// FuzzRenderApproval: whatever a model puts in a request, rendering does
// not panic, Telegram takes the message within its room, every character
// shown raw is visible, the only line breaks are the message's and the
// pretty-printer's own, and short values read back to exactly what runs.
func FuzzRenderApproval(f *testing.F) {
	f.Add("web-fetch.fetch", "Domain \"go.dev\" is not on the allowlist.", "url", "https://go.dev", "shell.run", `{"cmd":"ls"}`, uint8(1), false)
	f.Add("t\u2028", "r\u3164\n", "k\u2800", "v\u202E\u00A0\t", "q\u115F\u1160", "{\n\"a\":\"\uFFA0\"}", uint8(7), true)
	f.Add("[U+0041]", "\xff", "a\"b", "\\u2028", "\u180E", "\r\n", uint8(0), false)
	f.Fuzz(func(t *testing.T, name, reason, key, value, qname, qargs string, queued uint8, long bool) {
		if long {
			value = strings.Repeat(value+"x", 5000/(len(value)+1)+1)
		}
		raw := `{"` + key + `":"` + value + `"}`
		req := prompt.ApprovalRequest{ApprovalID: "a1", ToolName: name, Reason: reason, Input: json.RawMessage(raw)}
		for range queued % 8 {
			req.Queued = append(req.Queued, prompt.ToolCall{Name: qname, Arguments: qargs})
		}
		view := renderApproval(req)
		plain, ents, err := telegramtest.ParseHTML(view.HTML)
		if err != nil {
			t.Fatalf("Telegram would refuse it: %v", err)
		}
		if n := utf16Len(plain); n > maxText-outcomeRoom {
			t.Fatalf("request counts %d characters", n)
		}
		for _, shown := range []string{plain, string(view.Document)} {
			for _, r := range markerRE.ReplaceAllString(shown, "") {
				if r != '\n' && !notHidden(r) {
					t.Fatalf("%U shown raw", r)
				}
			}
			unmark(t, shown) // every "[U+" is a whole marker
		}
		// The pretty-printer's lines, as the test makes them.
		var buf bytes.Buffer
		pretty, isJSON := raw, json.Indent(&buf, []byte(raw), "", "  ") == nil
		if isJSON {
			pretty = strings.TrimRight(buf.String(), " \t\r\n")
		}
		lines := 2 // header, tool
		if reason != "" {
			lines++
		}
		if view.Document == nil {
			lines += 2 + strings.Count(pretty, "\n")*boolInt(isJSON)
		} else {
			lines++
		}
		if n := len(req.Queued); n > 0 {
			lines += 1 + min(n, maxQueuedShown) + boolInt(n > maxQueuedShown)
		}
		if got := strings.Count(plain, "\n") + 1; got != lines {
			t.Fatalf("%d lines, want %d:\n%s", got, lines, plain)
		}
		// Markers read back to the input the tool gets, indented.
		if utf8.ValidString(raw) {
			got := string(view.Document)
			if view.Document == nil {
				got = entityText(plain, ents, models.MessageEntityTypePre)
			}
			if unmark(t, got) != pretty {
				t.Fatalf("input reads back as %q, want %q", unmark(t, got), pretty)
			}
		}
		if utf8.ValidString(name) && utf8.RuneCountInString(name) <= 6 {
			if got := unmark(t, entityText(plain, ents, models.MessageEntityTypeCode)); got != name {
				t.Fatalf("tool name reads back as %q, want %q", got, name)
			}
		}
		// A copy closed from its shown text (handle.go) is shown unchanged.
		if visible(plain) != plain {
			t.Fatal("visible changes text already shown")
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
