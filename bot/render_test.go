package bot

import (
	"encoding/json"
	"strings"
	"testing"

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
	if got := oneLine("a\n✅ Approved"); got != "a⏎✅ Approved" {
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
