package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"tollgate/prompt"
)

// maxText is Telegram's limit on a message's text after entity parsing, in
// UTF-16 code units (the unit Telegram counts in).
const maxText = 4096

// outcomeRoom is kept free in an approval message for the outcome line
// added when it is decided.
const outcomeRoom = 400

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// escapeHTML escapes what Telegram's HTML parser treats as markup.
func escapeHTML(s string) string {
	if !strings.ContainsAny(s, "<>&") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isBidi reports the bidi embedding, override and isolate controls, which
// can make text display in an order other than the one it is read in.
func isBidi(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || r == 0x200E || r == 0x200F || r == 0x061C
}

// isInvisible reports characters a reader of the request cannot see, or
// that move text onto another line, so that two different arguments could
// look the same or part of one could hide. It is the reader's view that
// decides, not the Unicode category alone:
//
//   - everything Go does not count as printable: controls (Cc, including
//     tab, CR, NEL), format characters (Cf: bidi controls, zero-width
//     space and joiners, soft hyphen, BOM, U+180E, tag characters), line
//     and paragraph separators (Zl U+2028, Zp U+2029), every space but
//     U+0020 (Zs: U+00A0, U+1680, U+2000-U+200A, U+202F, U+205F, U+3000,
//     each of which looks like a plain space or like nothing), private use
//     (Co) and unassigned code points (Cn), which fonts draw as nothing or
//     as the same box;
//   - printable characters that are default-ignorable or draw blank: the
//     Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the combining
//     grapheme joiner U+034F, Khmer U+17B4/U+17B5, the variation selectors
//     (U+FE00-U+FE0F, U+180B-U+180F, U+E0100-U+E01EF), and U+2800 BRAILLE
//     PATTERN BLANK, U+1D159 MUSICAL SYMBOL NULL NOTEHEAD, U+16FE4 KHITAN
//     SMALL SCRIPT FILLER, which Unicode does not list but fonts draw empty.
//
// Newline is the one exception: callers keep it only where it is
// structure (the pretty-printer's own lines); oneLine marks it elsewhere.
// Look-alike letters (Cyrillic "а" for Latin "a") and composed versus
// decomposed accents are visible characters and are not marked; a domain
// to be stored is named in punycode for that.
func isInvisible(r rune) bool {
	switch {
	case r >= 0x20 && r < 0x7F, r == '\n':
		return false
	case !unicode.IsPrint(r),
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r),
		unicode.Is(unicode.Variation_Selector, r):
		return true
	}
	return r == 0x2800 || r == 0x1D159 || r == 0x16FE4
}

func marker(r rune) string { return fmt.Sprintf("[U+%04X]", r) }

// visible replaces invisible and direction-changing characters with a
// marker naming them, so that what a human approves is what runs. It
// leaves markers alone, so text already shown can be shown again.
func visible(s string) string { return markRunes(s, isInvisible) }

// markRunes replaces each rune of s that hidden reports with its marker.
// A byte that is not UTF-8 is marked as U+FFFD, the character every JSON
// decoder (the tool's too) reads it as; left raw, Telegram would refuse
// the message.
func markRunes(s string, hidden func(rune) bool) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1, hidden(r):
			b.WriteString(marker(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// oneLine is visible for a value shown on one line: a newline in it is
// marked too, so it cannot start a line of its own such as "✅ Approved".
func oneLine(s string) string {
	return strings.ReplaceAll(visible(s), "\n", marker('\n'))
}

// literalMarkers marks the '[' of every "[U+" already in s, so that in what
// exact shows every "[U+XXXX]" is a marker: an argument holding the text
// "[U+202E]" cannot pass for one holding U+202E. Only the request's own
// values go through it; visible and oneLine must stay idempotent, as text
// already shown (a who name, a message's text) is shown through them again.
func literalMarkers(s string) string {
	return strings.ReplaceAll(s, "[U+", marker('[')+"U+")
}

// exact is visible with literal markers marked: what the request shows of
// a value that will run reads back to exactly that value.
func exact(s string) string { return visible(literalMarkers(s)) }

// answerVisible makes only bidi controls visible: model answers may carry
// zero-width joiners that emoji need.
func answerVisible(s string) string { return markRunes(s, isBidi) }

// htmlText builds Telegram HTML and counts the characters Telegram will
// count once the markup is parsed.
type htmlText struct {
	b strings.Builder
	n int
}

func (h *htmlText) text(s string) *htmlText {
	h.b.WriteString(escapeHTML(s))
	h.n += utf16Len(s)
	return h
}

func (h *htmlText) tag(s string) *htmlText {
	h.b.WriteString(s)
	return h
}

func (h *htmlText) wrap(tag, s string) *htmlText {
	return h.tag("<" + tag + ">").text(s).tag("</" + tag + ">")
}

// approvalView is an approval request as shown in the chat.
type approvalView struct {
	HTML string
	// Document is the whole input when it does not fit in the message;
	// nil when it does.
	Document []byte
	// Preview is what the call will do (a diff) when it does not fit,
	// attached as PreviewName; nil when it is in the message.
	Preview     []byte
	PreviewName string
}

// shownInput is the input as the request shows it: indented as it was
// sent, without decoding it, so duplicate keys and number spellings stay
// exactly as the tool sees them, and marked by exact. The model's raw
// arguments are validated JSON, so a control character (newline included)
// can only be escaped inside a string ("\n" shows as those two
// characters) and every newline left is the pretty-printer's; but a line
// or paragraph separator, a blank-drawing character or any odd space can
// be raw in a string, and exact marks those.
func shownInput(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		// Not JSON: no newline in it is the pretty-printer's.
		return strings.ReplaceAll(exact(string(raw)), "\n", marker('\n'))
	}
	// Indent keeps whitespace after the value as sent; it means nothing to
	// JSON and would show as blank lines that are not the pretty-printer's.
	return exact(strings.TrimRight(buf.String(), " \t\r\n"))
}

// Bounds, in UTF-16 units, on the values shown around the input, so that a
// request always fits in one message with room for its outcome line: a
// model can name a queued call anything and fill its arguments with
// characters that visible expands.
const (
	maxQueuedShown  = 5
	maxNameLength   = 64
	maxQueuedArgs   = 200
	maxReasonLength = 1000
	maxByLength     = 100
	maxNoteLength   = 180
	// A chain's commands: all of them when the message has room, the
	// first few when the preview (which lists them all) is attached.
	maxPartsShown = 12
	maxPartLength = 150
	maxPartsShort = 5
	maxPartShort  = 80
)

// cutUnits returns the longest prefix of s, cut at a rune boundary, that
// Telegram counts as at most n characters (UTF-16 code units).
func cutUnits(s string, n int) string {
	units := 0
	for i, r := range s {
		if units+utf16.RuneLen(r) > n {
			return s[:i]
		}
		units += utf16.RuneLen(r)
	}
	return s
}

// clip is oneLine cut to n UTF-16 units, saying so with the length of s:
// nothing is shortened silently. The cut comes after visible, whose
// markers can make a value eight times longer, so that the bound holds for
// what Telegram counts.
func clip(s string, n int) string { return cut(oneLine(s), s, n) }

// clipExact is clip for the values of a request, which will run: literal
// markers in them are marked too (see literalMarkers).
func clipExact(s string, n int) string { return cut(oneLine(literalMarkers(s)), s, n) }

// cut shortens v, the shown form of s, to n UTF-16 units. A marker the cut
// would split is dropped whole: half of one would read as text.
func cut(v, s string, n int) string {
	if utf16Len(v) <= n {
		return v
	}
	v = cutUnits(v, n)
	if i := strings.LastIndex(v, "[U+"); i >= 0 && !strings.Contains(v[i:], "]") {
		v = v[:i]
	}
	return v + fmt.Sprintf("… (%d characters in all)", utf8.RuneCountInString(s))
}

// renderApproval shows a request: tool, reason, input and what is queued
// after it. Every value is escaped and marked by exact; an input too long
// for one message is announced with its length and returned as a document.
//
// The document carries the same marking as the message rather than the
// raw bytes: it is read in a viewer that shows a right-to-left override or
// a zero-width space no better than the chat does, and the user approves
// what they read. The message also says how many characters in it are
// marked, so that nobody has to open the file to learn that it hides some;
// it says so without spelling a marker, as every "[U+" in the message
// stands for a character.
func renderApproval(req prompt.ApprovalRequest) approvalView {
	input := shownInput(req.Input)
	preview := ""
	if req.Preview != "" {
		preview = exact(strings.TrimRight(req.Preview, "\n"))
	}
	previewName := req.PreviewName
	if previewName == "" {
		previewName = "preview.txt"
	}
	previewName = req.ApprovalID + "-" + previewName
	build := func(inline, previewInline bool) *htmlText {
		h := &htmlText{}
		h.tag("🔐 ").wrap("b", "Approval needed").text("\nTool: ").wrap("code", clipExact(req.ToolName, maxNameLength))
		if req.Reason != "" {
			h.text("\nReason: " + clipExact(req.Reason, maxReasonLength))
		}
		if req.Edit != nil {
			h.text("\n✏️ Input edited by " + clip(req.Edit.By, maxByLength) + "; the agent is told what changed.")
		}
		if req.InputHash != "" {
			// A short prefix is enough for two people comparing one request.
			h.text("\nInput hash: ").wrap("code", oneLine(req.InputHash[:min(len(req.InputHash), 12)]))
		}
		if len(req.Parts) > 0 {
			n, width := maxPartsShown, maxPartLength
			if !previewInline {
				n, width = maxPartsShort, maxPartShort
			}
			h.text(fmt.Sprintf("\nCommands (%d), one per line; ✓ a rule allows it, • none does:", len(req.Parts)))
			for i, p := range req.Parts {
				if i == n {
					where := "in the attachment"
					switch {
					case preview == "":
						where = "in the input below"
					case previewInline:
						where = "under What it does"
					}
					h.text(fmt.Sprintf("\n…and %d more, listed %s.", len(req.Parts)-n, where))
					break
				}
				mark := "\n• "
				if p.Allowed {
					mark = "\n✓ "
				}
				h.text(mark).wrap("code", clipExact(p.Label, width))
				if p.Dynamic {
					h.text(" (what runs is decided only when it runs)")
				}
			}
		}
		if preview != "" && previewInline {
			h.text("\nWhat it does:\n").wrap("pre", preview)
		} else if preview != "" {
			h.text(fmt.Sprintf("\nWhat it does: %d characters, attached whole as %s.", utf16Len(preview), oneLine(previewName)))
		}
		if inline {
			h.text("\nInput:\n").wrap("pre", input)
		} else {
			h.text(fmt.Sprintf("\nInput: %d characters, too long to show here; it is attached whole as input-%s.json.", utf16Len(input), oneLine(req.ApprovalID)))
			if n := markedIn(input, string(req.Input)); n > 0 {
				h.text(fmt.Sprintf(" It holds %d hidden or line-breaking characters, each shown as its code point in brackets.", n))
			}
		}
		if len(req.Queued) > 0 {
			h.text(fmt.Sprintf("\nQueued after it (%d), each asks again if it needs approval:", len(req.Queued)))
			for i, q := range req.Queued {
				if i == maxQueuedShown {
					h.text(fmt.Sprintf("\n…and %d more.", len(req.Queued)-maxQueuedShown))
					break
				}
				h.text(fmt.Sprintf("\n%d. ", i+1)).wrap("code", clipExact(q.Name, maxNameLength)).text(" ").wrap("code", clipExact(q.Arguments, maxQueuedArgs))
			}
		}
		h.text(votesLine(req))
		return h
	}
	// Whole in the message if it fits; else the preview attached; else
	// the input too.
	fits := func(h *htmlText) bool { return h.n <= maxText-outcomeRoom }
	if h := build(true, true); fits(h) {
		return approvalView{HTML: h.b.String()}
	}
	if h := build(true, false); preview != "" && fits(h) {
		return approvalView{HTML: h.b.String(), Preview: []byte(preview), PreviewName: previewName}
	}
	v := approvalView{HTML: build(false, false).b.String(), Document: []byte(input)}
	if preview != "" {
		v.Preview, v.PreviewName = []byte(preview), previewName
	}
	return v
}

// markedIn counts the hidden characters marked in shown, the exact form of
// raw: its markers less those that mark a literal "[U+" of raw.
func markedIn(shown, raw string) int {
	return strings.Count(shown, "[U+") - strings.Count(raw, "[U+")
}

// outcomeLine is added to every copy of a decided request. Telegram counts
// it as at most outcomeRoom characters, so the edit that adds it to a
// request rendered by renderApproval is never refused as too long (which
// would leave live-looking buttons on a decided request).
func outcomeLine(icon, verb, by string, at time.Time, note string) string {
	h := &htmlText{}
	h.text("\n\n"+icon+" ").wrap("b", verb).text(" by " + clip(by, maxByLength) + " at " + at.UTC().Format("2006-01-02 15:04 UTC"))
	if note != "" {
		h.text(": " + clip(note, maxNoteLength))
	}
	return h.b.String()
}

// decidedLine is the outcome line of an approval decided elsewhere, as the
// service tells it; no longer than an outcomeLine.
func decidedLine(ref prompt.ApprovalRef) string {
	switch {
	case ref.Status == prompt.ApprovalApproved:
		// The note of an approval is what "always" granted with it, or
		// why it ended without running.
		return outcomeLine("✅", "Approved", ref.DecidedBy, ref.DecidedAt, ref.Note)
	case ref.Status == prompt.ApprovalEdited:
		return outcomeLine("✏️", "Edited", ref.DecidedBy, ref.DecidedAt, "the edited call is asked for below")
	case ref.Status == prompt.ApprovalRejected && ref.Note == "cancelled":
		return outcomeLine("🚫", "Cancelled", ref.DecidedBy, ref.DecidedAt, "")
	case ref.Status == prompt.ApprovalRejected && ref.Note == buttonRejectReason:
		return outcomeLine("❌", "Rejected", ref.DecidedBy, ref.DecidedAt, "")
	case ref.Status == prompt.ApprovalRejected:
		return outcomeLine("❌", "Rejected", ref.DecidedBy, ref.DecidedAt, ref.Note)
	}
	// Expired: the prompt ended without a decision; nobody decided it.
	h := &htmlText{}
	h.text("\n\n⌛ ").wrap("b", "Expired")
	if ref.Note != "" {
		h.text(": " + clip(ref.Note, maxNoteLength))
	}
	return h.b.String()
}

// chunk is one message of an answer, as HTML and as plain text for when
// Telegram refuses the HTML.
type chunk struct {
	HTML, Plain string
}

type line struct {
	html, plain string
	n           int
	pre         bool
}

// renderInline turns one line of Markdown-ish text into HTML: `code`,
// **bold**; anything unmatched stays literal.
func renderInline(s string) line {
	h := &htmlText{}
	var plain strings.Builder
	for s != "" {
		switch {
		case strings.HasPrefix(s, "`"):
			if end := strings.Index(s[1:], "`"); end > 0 {
				h.wrap("code", s[1:1+end])
				plain.WriteString(s[1 : 1+end])
				s = s[end+2:]
				continue
			}
		case strings.HasPrefix(s, "**"):
			if end := strings.Index(s[2:], "**"); end > 0 {
				h.wrap("b", s[2:2+end])
				plain.WriteString(s[2 : 2+end])
				s = s[end+4:]
				continue
			}
		}
		n := strings.IndexAny(s[1:], "`*")
		if n < 0 {
			n = len(s)
		} else {
			n++
		}
		h.text(s[:n])
		plain.WriteString(s[:n])
		s = s[n:]
	}
	return line{html: h.b.String(), plain: plain.String(), n: h.n}
}

// splitLong cuts a line too long for one message at rune boundaries.
func splitLong(s string, max int) []string {
	var out []string
	for utf16Len(s) > max {
		n, cut := 0, 0
		for i, r := range s {
			if n+utf16.RuneLen(r) > max {
				cut = i
				break
			}
			n += utf16.RuneLen(r)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

var heading = regexp.MustCompile(`^#{1,6} `)

// renderAnswer turns model text into messages of at most maxText
// characters, split at line boundaries; nothing is dropped.
func renderAnswer(text string) []chunk {
	text = answerVisible(strings.ReplaceAll(text, "\r\n", "\n"))
	var lines []line
	inFence := false
	for _, raw := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(raw), "```") {
			inFence = !inFence
			continue
		}
		// Room for the "\n" and for tags is not counted: tags add nothing
		// Telegram counts.
		for _, part := range splitLong(raw, maxText-1) {
			switch {
			case inFence:
				h := &htmlText{}
				h.text(part)
				lines = append(lines, line{html: h.b.String(), plain: part, n: h.n, pre: true})
			case heading.MatchString(part):
				title := strings.TrimSpace(heading.ReplaceAllString(part, ""))
				h := &htmlText{}
				h.wrap("b", title)
				lines = append(lines, line{html: h.b.String(), plain: title, n: h.n})
			default:
				lines = append(lines, renderInline(part))
			}
		}
	}
	var out []chunk
	var html, plain strings.Builder
	n, open := 0, false
	flush := func() {
		if open {
			html.WriteString("</pre>")
			open = false
		}
		if strings.TrimSpace(plain.String()) != "" {
			out = append(out, chunk{HTML: html.String(), Plain: plain.String()})
		}
		html.Reset()
		plain.Reset()
		n = 0
	}
	for _, l := range lines {
		sep := 0
		if plain.Len() > 0 {
			sep = 1
		}
		if n+sep+l.n > maxText {
			flush()
			sep = 0
		}
		if sep == 1 {
			html.WriteString("\n")
			plain.WriteString("\n")
			n++
		}
		if l.pre && !open {
			html.WriteString("<pre>")
			open = true
		} else if !l.pre && open {
			html.WriteString("</pre>")
			open = false
		}
		html.WriteString(l.html)
		plain.WriteString(l.plain)
		n += l.n
	}
	flush()
	return out
}
