package webfetch

import (
	"bytes"
	"errors"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Bounds on the markup one conversion may take. Parsing builds a node per
// element and the converter allocates several times that again: 2 MiB of
// bare "<a>" cost over 1 GiB allocated and 260 MB in use at once. Past
// these bounds the page is read as plain text, which costs only what it
// prints.
const (
	// maxElements bounds the elements parsed and converted per fetch.
	maxElements = 10000
	// maxDepth bounds nesting (x/net/html refuses past 512 open elements,
	// with an error that would lose the page).
	maxDepth = 256
	// maxTokenBytes bounds one token as the tokenizer buffers it: a single
	// tag with a million attributes is one token.
	maxTokenBytes = 256 << 10
)

// markupScan is what scanMarkup learned of a page.
type markupScan struct {
	end   int  // convert page[:end]
	cut   bool // end < len(page): the page goes on
	plain bool // too much markup: read it as plain text instead
}

// scanMarkup walks page's tokens without building a tree, and finds how
// much of it to convert: up to where its visible text passes textBudget
// runes, unless the elements or their nesting pass the bounds first.
func scanMarkup(page string, textBudget int) markupScan {
	z := html.NewTokenizer(strings.NewReader(page))
	z.SetMaxBuf(maxTokenBytes)
	off, elements, depth, text := 0, 0, 0, 0
	skip := false // inside script or style, whose text is not shown
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if !errors.Is(z.Err(), html.ErrBufferExceeded) {
				return markupScan{end: len(page)}
			}
			// One token too big: keep the start of a text, drop a tag.
			end := off
			if off < len(page) && page[off] != '<' {
				end = off + maxTokenBytes
				for end > off && !utf8.RuneStart(page[end]) {
					end--
				}
			}
			return markupScan{end: end, cut: true}
		}
		raw := z.Raw()
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			elements++
			name, _ := z.TagName()
			a := atom.Lookup(name)
			skip = a == atom.Script || a == atom.Style
			if tt == html.StartTagToken && nests(a) {
				depth++
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if a := atom.Lookup(name); nests(a) && depth > 0 {
				depth--
			}
			skip = false
		case html.TextToken:
			if !skip {
				text += utf8.RuneCount(bytes.TrimSpace(raw))
			}
		}
		if elements > maxElements || depth > maxDepth {
			return markupScan{plain: true}
		}
		off += len(raw)
		if text > textBudget {
			return markupScan{end: off, cut: off < len(page)}
		}
	}
}

// nests reports whether an element of kind a stays open until its end
// tag: void elements never do, and elements with optional end tags are
// closed by their next sibling, so neither deepens the tree.
func nests(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Link, atom.Meta, atom.Source, atom.Track, atom.Wbr,
		atom.P, atom.Li, atom.Dt, atom.Dd, atom.Option, atom.Optgroup,
		atom.Tr, atom.Td, atom.Th, atom.Thead, atom.Tbody, atom.Tfoot, atom.Rt, atom.Rp:
		return false
	}
	return true
}

// plainText is page's visible text, blocks on lines of their own, for a
// page with too much markup to convert. It stops after maxRunes runes
// and reports whether it stopped early.
func plainText(page string, maxRunes int) (string, bool) {
	z := html.NewTokenizer(strings.NewReader(page))
	z.SetMaxBuf(maxTokenBytes)
	var b strings.Builder
	n := 0
	skip := false
	newline := func() {
		if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") {
			b.WriteByte('\n')
		}
	}
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return strings.TrimSpace(b.String()), errors.Is(z.Err(), html.ErrBufferExceeded)
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			switch a {
			case atom.Script, atom.Style, atom.Template, atom.Noscript, atom.Head:
				skip = tt == html.StartTagToken
			case atom.P, atom.Div, atom.Br, atom.Li, atom.Tr, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
				atom.Pre, atom.Blockquote, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Table,
				atom.Ul, atom.Ol, atom.Dl, atom.Dt, atom.Dd, atom.Hr:
				newline()
			}
		case html.TextToken:
			if skip {
				continue
			}
			words := strings.Fields(string(z.Text()))
			if len(words) == 0 {
				continue
			}
			if s := b.String(); s != "" && !strings.HasSuffix(s, "\n") {
				b.WriteByte(' ')
			}
			w := strings.Join(words, " ")
			b.WriteString(w)
			n += utf8.RuneCountInString(w)
			if n > maxRunes {
				return b.String(), true
			}
		}
	}
}
