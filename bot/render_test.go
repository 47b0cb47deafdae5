package bot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
)

func TestVisibleMarksHiddenCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"abc":                   "abc",
		"evil\u202Etxt.exe":     "evil[U+202E]txt.exe",
		"a\u200Bb\u2066c\u00AD": "a[U+200B]b[U+2066]c[U+00AD]",
		"bell\a":                "bell[U+0007]",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
	if got := oneLine("a\n✅ Approved"); got != "a[U+000A]✅ Approved" {
		t.Errorf("oneLine = %q", got)
	}
	// Emoji sequences survive in answers.
	if got := answerVisible("👨\u200D👩 \u202E"); got != "👨\u200D👩 [U+202E]" {
		t.Errorf("answerVisible = %q", got)
	}
}

func TestRenderApprovalCannotBeForged(t *testing.T) {
	req := prompt.ApprovalRequest{
		ApprovalID: "abc", ToolName: "web-fetch.fetch\n✅ Approved",
		Reason: "fetch <b>x</b>\n✅ Approved by admin",
		Input:  json.RawMessage(`{"url":"https://x.example/</pre><b>✅ Approved</b>\n\u202E"}`),
		Queued: []prompt.ToolCall{{Name: "shell.run", Arguments: `{"cmd":"</code><b>hi</b>"}`}},
	}
	view := renderApproval(req)
	plain, ents, err := telegramtest.ParseHTML(view.HTML)
	if err != nil {
		t.Fatalf("Telegram would refuse it: %v\n%s", err, view.HTML)
	}
	for _, line := range strings.Split(plain, "\n") {
		if strings.HasPrefix(line, "✅") {
			t.Errorf("forged line %q", line)
		}
	}
	bold := 0
	for _, e := range ents {
		if e.Type == "bold" {
			bold++
		}
	}
	if bold != 1 {
		t.Errorf("%d bold entities, want only the header", bold)
	}
	if !strings.Contains(plain, `"url": "https://x.example/</pre><b>✅ Approved</b>\n\u202E"`) {
		t.Errorf("input not shown as sent:\n%s", plain)
	}
	if view.Document != nil {
		t.Error("a short input went to a document")
	}
}

func TestRenderApprovalLongInputGoesToDocument(t *testing.T) {
	in := `{"cmd":"` + strings.Repeat("y", 5000) + `"}`
	view := renderApproval(prompt.ApprovalRequest{ApprovalID: "id1", ToolName: "t", Input: json.RawMessage(in)})
	plain, _, err := telegramtest.ParseHTML(view.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plain, "characters, too long to show here") || len(plain) > 1000 {
		t.Errorf("message %q", plain)
	}
	if !strings.Contains(string(view.Document), strings.Repeat("y", 5000)) {
		t.Error("document is not the whole input")
	}
}

func TestRenderAnswerSplitsAtLinesWithinLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("intro\n```\n")
	for range 300 {
		b.WriteString("code <line> & more 😀😀😀\n")
	}
	b.WriteString("```\n**end** `x`\n")
	b.WriteString(strings.Repeat("z", 9000))
	chunks := renderAnswer(b.String())
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	var all strings.Builder
	for i, c := range chunks {
		plain, _, err := telegramtest.ParseHTML(c.HTML)
		if err != nil {
			t.Fatalf("chunk %d refused: %v", i, err)
		}
		if n := utf16Len(plain); n > telegramtest.MaxTextLength {
			t.Errorf("chunk %d has %d characters", i, n)
		}
		if plain != c.Plain {
			t.Errorf("chunk %d: plain fallback differs from what HTML shows", i)
		}
		all.WriteString(plain)
	}
	if got := strings.Count(all.String(), "code <line> & more"); got != 300 {
		t.Errorf("%d code lines survived, want 300", got)
	}
	if got := strings.Count(all.String(), "z"); got != 9000 {
		t.Errorf("%d z survived, want 9000", got)
	}
}

func BenchmarkRenderApproval(b *testing.B) {
	req := prompt.ApprovalRequest{ApprovalID: "abc", ToolName: "web-fetch.fetch", Reason: "fetch a page",
		Input:  json.RawMessage(`{"url":"https://example.com/a/b?c=d","max_bytes":100000}`),
		Queued: []prompt.ToolCall{{Name: "web-fetch.fetch", Arguments: `{"url":"https://example.org"}`}}}
	b.ReportAllocs()
	for b.Loop() {
		renderApproval(req)
	}
}

func BenchmarkRenderAnswer10KB(b *testing.B) {
	text := strings.Repeat("Some **bold** text with `code` and <angles> & such.\n", 200)
	b.ReportAllocs()
	for b.Loop() {
		renderAnswer(text)
	}
}

func TestRenderAnswerMarkdownish(t *testing.T) {
	for in, want := range map[string]string{
		"## Title":           "<b>Title</b>",
		"#hashtag":           "#hashtag",
		"2*3*4 < 5 & **ok**": "2*3*4 &lt; 5 &amp; <b>ok</b>",
		"a `b<c>` d":         "a <code>b&lt;c&gt;</code> d",
		"unmatched ` tick":   "unmatched ` tick",
		"```\nx<y\n```":      "<pre>x&lt;y</pre>",
	} {
		in = strings.ReplaceAll(in, `\n`, "\n")
		got := renderAnswer(in)
		if len(got) != 1 || got[0].HTML != want {
			t.Errorf("renderAnswer(%q) = %+v, want %q", in, got, want)
		}
	}
}

// parsedLen is what Telegram counts of an HTML text; the test fails if
// Telegram would refuse it.
func parsedLen(t *testing.T, html string) int {
	t.Helper()
	plain, _, err := telegramtest.ParseHTML(html)
	if err != nil {
		t.Fatalf("Telegram would refuse it: %v", err)
	}
	return utf16Len(plain)
}

func TestDecidedRequestAlwaysFitsOneMessage(t *testing.T) {
	// Everything a model or a page can make long, filled with what visible
	// expands eightfold or with characters Telegram counts twice.
	zw, emoji := strings.Repeat("\u200B", 3000), strings.Repeat("😀", 3000)
	queued := make([]prompt.ToolCall, 7)
	for i := range queued {
		queued[i] = prompt.ToolCall{ID: "q", Name: zw, Arguments: emoji}
	}
	worst := outcomeLine("🚫", "Cancelled", zw+emoji, time.Now(), emoji+zw)
	if n := parsedLen(t, worst); n > outcomeRoom {
		t.Errorf("outcome line counts %d characters, more than the %d kept for it", n, outcomeRoom)
	}
	if !strings.Contains(worst, "(6000 characters in all)") {
		t.Errorf("a value was cut silently: %q", worst)
	}
	for name, in := range map[string]string{
		"inline":   `{"cmd":"ls"}`,
		"document": `{"cmd":"` + strings.Repeat("y", 5000) + `"}`,
	} {
		req := prompt.ApprovalRequest{ApprovalID: "abc", ToolName: emoji, Reason: zw + emoji, Input: json.RawMessage(in), Queued: queued}
		view := renderApproval(req)
		if n := parsedLen(t, view.HTML); n > maxText-outcomeRoom {
			t.Errorf("%s: request counts %d characters, more than %d", name, n, maxText-outcomeRoom)
		}
		if n := parsedLen(t, view.HTML+worst); n > maxText {
			t.Errorf("%s: decided request counts %d characters", name, n)
		}
		if (view.Document != nil) != (name == "document") {
			t.Errorf("%s: document %v", name, view.Document != nil)
		}
	}
	// An input just short of the inline limit, the largest message a
	// request can be, still takes the outcome line.
	base := renderApproval(prompt.ApprovalRequest{ApprovalID: "abc", ToolName: "t", Input: json.RawMessage(`{"cmd":""}`)})
	pad := maxText - outcomeRoom - parsedLen(t, base.HTML)
	view := renderApproval(prompt.ApprovalRequest{ApprovalID: "abc", ToolName: "t", Input: json.RawMessage(`{"cmd":"` + strings.Repeat("x", pad) + `"}`)})
	if view.Document != nil {
		t.Fatal("the largest inline input went to a document")
	}
	if n := parsedLen(t, view.HTML+worst); n > maxText {
		t.Errorf("decided request at the inline limit counts %d characters", n)
	}
}

func TestWhoKeepsTheIDOfALongName(t *testing.T) {
	u := models.User{ID: 1234567890, FirstName: strings.Repeat("😀", 64), LastName: strings.Repeat("\u200B", 64)}
	got := who(u)
	if !strings.HasSuffix(got, "… (1234567890)") || utf16Len(got) > maxByLength {
		t.Errorf("who = %q (%d characters)", got, utf16Len(got))
	}
	if got := who(models.User{ID: 7, FirstName: "Ann", LastName: "Lee"}); got != "Ann Lee (7)" {
		t.Errorf("who = %q", got)
	}
	line := outcomeLine("✅", "Approved", who(u), time.Date(2026, 11, 22, 3, 4, 0, 0, time.UTC), "")
	if !strings.Contains(line, "(1234567890) at 2026-11-22 03:04 UTC") {
		t.Errorf("outcome line %q lost the ID", line)
	}
}

func TestDecidedLineTellsHowTheRequestEnded(t *testing.T) {
	at := time.Date(2026, 11, 22, 3, 4, 0, 0, time.UTC)
	long := strings.Repeat("😀\u200B", 3000)
	for _, tc := range []struct {
		ref  prompt.ApprovalRef
		want string
	}{
		{prompt.ApprovalRef{Status: prompt.ApprovalApproved, DecidedBy: "Alice (111)", DecidedAt: at}, "✅ Approved by Alice (111) at 2026-11-22 03:04 UTC"},
		{prompt.ApprovalRef{Status: prompt.ApprovalRejected, DecidedBy: "Bob (222)", DecidedAt: at, Note: "no"}, "❌ Rejected by Bob (222) at 2026-11-22 03:04 UTC"},
		// Nobody decided an expired one: no "by", and the note says why.
		{prompt.ApprovalRef{Status: prompt.ApprovalExpired, Note: "not run: Cancelled by Alice (111)."}, "⌛ Expired: not run: Cancelled by Alice (111)."},
		{prompt.ApprovalRef{Status: prompt.ApprovalExpired, Note: long}, "⌛ Expired: "},
	} {
		line := decidedLine(tc.ref)
		plain, _, err := telegramtest.ParseHTML(line)
		if err != nil {
			t.Fatalf("%s: Telegram would refuse %q: %v", tc.ref.Status, line, err)
		}
		if !strings.Contains(plain, tc.want) {
			t.Errorf("%s: line %q, want %q in it", tc.ref.Status, plain, tc.want)
		}
		if strings.Contains(plain, " by  at") {
			t.Errorf("%s: line %q names nobody", tc.ref.Status, plain)
		}
		if n := parsedLen(t, line); n > outcomeRoom {
			t.Errorf("%s: line counts %d characters, more than the %d kept for it", tc.ref.Status, n, outcomeRoom)
		}
	}
}

// Two people comparing a request can tell it is the same one: the message
// shows the start of the hash of the input it displays.
func TestApprovalShowsTheStartOfItsInputHash(t *testing.T) {
	in := `{"cmd":"ls"}`
	req := prompt.ApprovalRequest{ApprovalID: "abc", ToolName: "shell.run", Input: json.RawMessage(in), InputHash: prompt.InputHash(in)}
	view := renderApproval(req)
	if want := "Input hash: <code>" + req.InputHash[:12] + "</code>"; !strings.Contains(view.HTML, want) {
		t.Fatalf("message %q lacks %q", view.HTML, want)
	}
	long := prompt.ApprovalRequest{ApprovalID: "abc", ToolName: "shell.run", InputHash: req.InputHash,
		Input: json.RawMessage(`{"cmd":"` + strings.Repeat("x", 5000) + `"}`)}
	if view := renderApproval(long); view.Document == nil || !strings.Contains(view.HTML, req.InputHash[:12]) {
		t.Fatal("a request whose input is attached does not show its hash in the message")
	}
}
