package bot

import (
	"strings"
	"testing"
	"time"

	"tollgate/prompt"
)

// TestAuditFitsOneMessage: the longest values /audit can meet still make
// one message Telegram accepts, every value clipped and escaped.
func TestAuditFitsOneMessage(t *testing.T) {
	long := strings.Repeat("<&x>", 500)
	var es []prompt.AuditEntry
	for range auditShown {
		es = append(es, prompt.AuditEntry{At: time.Date(2026, 11, 22, 3, 4, 0, 0, time.UTC), Tool: long,
			InputHash: strings.Repeat("a", 64), Outcome: prompt.OutcomeDenied, SourceKind: prompt.SourceRule,
			Source: long, Feedback: long})
	}
	html := renderAudit(es)
	if n := utf16Len(stripTags(html)); n > maxText {
		t.Fatalf("/audit is %d characters, over Telegram's %d", n, maxText)
	}
	if strings.Contains(html, "<&x>") {
		t.Fatal("a value reached the HTML unescaped")
	}
	if !strings.Contains(html, "🚫 denied") || !strings.Contains(html, "rule ") {
		t.Fatalf("lines lack the outcome or the source: %s", html)
	}
}

// stripTags unescapes HTML text as Telegram counts it.
func stripTags(html string) string {
	var b strings.Builder
	in := false
	for _, r := range html {
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(b.String())
}
