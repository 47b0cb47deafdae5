package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"unicode/utf8"
)

// A matcher is one compiled pattern for one Kind. match reports whether value
// matches; when it does not and there is more to say than "value is not
// pattern", note says it (for Explain and Decision.Why). strict is set for
// allow rules: values that only match after tricks (dot-dot segments, doubled
// slashes, encoded separators, odd host names) do not match a strict pattern.
type matcher interface {
	match(value string, strict bool) (ok bool, note string)
}

func compile(kind Kind, pattern string) (matcher, error) {
	if pattern == "" {
		return nil, errors.New("empty pattern")
	}
	switch kind {
	case Text:
		toks, err := lexGlob(pattern)
		if err != nil {
			return nil, err
		}
		return textMatcher(toks), nil
	case Path:
		return compilePath(pattern)
	case Host:
		return compileHost(pattern)
	}
	return nil, fmt.Errorf("unknown field kind %d", int(kind))
}

// ---- glob tokens, shared by Text and Path ----

type tokKind uint8

const (
	tLit   tokKind = iota // one literal rune
	tAny                  // ?
	tStar                 // *
	tClass                // [...]
)

type tok struct {
	kind tokKind
	r    rune
	cls  *class
}

type class struct {
	neg    bool
	ranges [][2]rune
}

func (c *class) has(r rune) bool {
	in := false
	for _, rg := range c.ranges {
		if rg[0] <= r && r <= rg[1] {
			in = true
			break
		}
	}
	return in != c.neg
}

// lexGlob turns a glob into tokens: '*', '?', '[...]' (negated by a leading
// '^' or '!', ranges a-z), and '\' escaping the next rune anywhere.
func lexGlob(p string) ([]tok, error) {
	if !utf8.ValidString(p) {
		return nil, errors.New("pattern is not valid UTF-8")
	}
	var toks []tok
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; r {
		case '*':
			toks = append(toks, tok{kind: tStar})
		case '?':
			toks = append(toks, tok{kind: tAny})
		case '\\':
			if i+1 == len(rs) {
				return nil, errors.New(`pattern ends with an escaping '\'`)
			}
			i++
			toks = append(toks, tok{kind: tLit, r: rs[i]})
		case '[':
			c, n, err := lexClass(rs[i+1:])
			if err != nil {
				return nil, err
			}
			i += n
			toks = append(toks, tok{kind: tClass, cls: c})
		default:
			toks = append(toks, tok{kind: tLit, r: r})
		}
	}
	return toks, nil
}

// lexClass reads a class after its '['; n counts the runes used, ']' included.
func lexClass(rs []rune) (c *class, n int, err error) {
	c = &class{}
	i := 0
	if i < len(rs) && (rs[i] == '^' || rs[i] == '!') {
		c.neg = true
		i++
	}
	next := func() (rune, bool) {
		if i >= len(rs) {
			return 0, false
		}
		r := rs[i]
		i++
		if r == '\\' {
			if i >= len(rs) {
				return 0, false
			}
			r = rs[i]
			i++
		}
		return r, true
	}
	for {
		if i >= len(rs) {
			return nil, 0, errors.New("unclosed '[' in pattern")
		}
		if rs[i] == ']' {
			if len(c.ranges) == 0 {
				return nil, 0, errors.New("empty character class '[]' in pattern")
			}
			return c, i + 1, nil
		}
		lo, ok := next()
		if !ok {
			return nil, 0, errors.New("unclosed '[' in pattern")
		}
		hi := lo
		if i+1 < len(rs) && rs[i] == '-' && rs[i+1] != ']' {
			i++
			if hi, ok = next(); !ok {
				return nil, 0, errors.New("unclosed '[' in pattern")
			}
			if hi < lo {
				return nil, 0, fmt.Errorf("bad range %q-%q in character class", lo, hi)
			}
		}
		c.ranges = append(c.ranges, [2]rune{lo, hi})
	}
}

// matchToks matches the whole of s against toks. '*' matches any run of
// runes; it is the classic one-backtrack-point wildcard match, which is
// exact for unrestricted stars and takes at most len(toks)*len(s) steps.
func matchToks(toks []tok, s []rune) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(toks) {
			t := toks[pi]
			switch {
			case t.kind == tStar:
				starP, starS = pi, si
				pi++
				continue
			case t.kind == tAny,
				t.kind == tLit && t.r == s[si],
				t.kind == tClass && t.cls.has(s[si]):
				pi++
				si++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		si = starS
		pi = starP + 1
	}
	for pi < len(toks) && toks[pi].kind == tStar {
		pi++
	}
	return pi == len(toks)
}

// ---- Text ----

type textMatcher []tok

func (m textMatcher) match(v string, _ bool) (bool, string) {
	return matchToks(m, []rune(v)), ""
}

// ---- Path ----

// A path pattern is a list of segments split on literal '/'; a segment that
// is exactly "**" (globstar) matches zero or more whole segments.
type pathMatcher struct {
	segs    []pathSeg
	dotdots int // ".." segments the pattern spells out
	doubles int // "//" the pattern spells out
}

type pathSeg struct {
	globstar bool
	toks     []tok
}

func compilePath(p string) (*pathMatcher, error) {
	toks, err := lexGlob(p)
	if err != nil {
		return nil, err
	}
	m := &pathMatcher{}
	var cur []tok
	flush := func() error {
		stars := 0
		for i, t := range cur {
			if t.kind == tStar && i > 0 && cur[i-1].kind == tStar {
				stars++
			}
		}
		switch {
		case len(cur) == 2 && stars == 1:
			m.segs = append(m.segs, pathSeg{globstar: true})
		case stars > 0:
			return errors.New("'**' must be a whole path segment, as in /a/**/b")
		default:
			m.segs = append(m.segs, pathSeg{toks: cur})
		}
		cur = nil
		return nil
	}
	for _, t := range toks {
		if t.kind == tLit && t.r == '/' {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		cur = append(cur, t)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	// What the pattern itself spells out, read the way values are read.
	lit := unescapeGlob(p)
	m.dotdots = countDotDot(lit)
	m.doubles = strings.Count(lit, "//")
	return m, nil
}

func unescapeGlob(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

func (m *pathMatcher) matchRaw(v string) bool {
	segs := strings.Split(v, "/")
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(segs) {
		if pi < len(m.segs) {
			if m.segs[pi].globstar {
				starP, starS = pi, si
				pi++
				continue
			}
			if matchToks(m.segs[pi].toks, []rune(segs[si])) {
				pi++
				si++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		si = starS
		pi = starP + 1
	}
	for pi < len(m.segs) && m.segs[pi].globstar {
		pi++
	}
	return pi == len(m.segs)
}

func (m *pathMatcher) match(v string, strict bool) (bool, string) {
	dec := decodeSeparators(v)
	if !strict {
		// deny and ask: any reading of the value that matches is enough.
		for _, c := range []string{v, cleanPath(v), dec, cleanPath(dec)} {
			if m.matchRaw(c) {
				return true, ""
			}
		}
		return false, ""
	}
	// allow: the value as given must match, and so must the value with
	// encoded separators decoded; and it may not hold more ".." segments or
	// "//" than the pattern spells out.
	if !m.matchRaw(v) || (dec != v && !m.matchRaw(dec)) {
		if dec != v && m.matchRaw(v) {
			return false, fmt.Sprintf("it reads as %q once %%2e, %%2f, %%5c and '\\' are decoded", dec)
		}
		return false, ""
	}
	if countDotDot(dec) > m.dotdots {
		return false, "it has a \"..\" segment and an allow pattern must spell those out"
	}
	if strings.Count(dec, "//") > m.doubles {
		return false, "it has \"//\" and an allow pattern must spell those out"
	}
	return true, ""
}

func countDotDot(s string) int {
	n := 0
	for _, seg := range strings.Split(s, "/") {
		if seg == ".." {
			n++
		}
	}
	return n
}

// decodeSeparators spells out what a server may read as '.' or '/':
// percent-encoded dots, slashes and backslashes, and backslashes.
func decodeSeparators(s string) string {
	if !strings.ContainsAny(s, "%\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			switch strings.ToLower(s[i+1 : i+3]) {
			case "2e":
				b.WriteByte('.')
				i += 2
				continue
			case "2f", "5c":
				b.WriteByte('/')
				i += 2
				continue
			}
		}
		if s[i] == '\\' {
			b.WriteByte('/')
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cleanPath is path.Clean, keeping a URL's "scheme://host" as it is.
func cleanPath(s string) string {
	if s == "" {
		return s
	}
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			return s
		}
		return s[:i+3+j] + path.Clean(rest[j:])
	}
	return path.Clean(s)
}

// ---- Host ----

type hostMatcher struct {
	any    bool   // "*": every host
	suffix string // "*.example.com" -> ".example.com"
	exact  string // "example.com"
}

func compileHost(p string) (*hostMatcher, error) {
	for _, r := range p {
		if r >= utf8.RuneSelf {
			return nil, fmt.Errorf("host pattern %q is not ASCII: write the name in punycode (xn--...)", p)
		}
	}
	h := strings.TrimSuffix(asciiLower(p), ".")
	if h == "*" {
		return &hostMatcher{any: true}, nil
	}
	m := &hostMatcher{}
	rest := h
	if strings.HasPrefix(h, "*.") {
		rest = h[2:]
	}
	if strings.Contains(rest, "*") {
		return nil, fmt.Errorf("host pattern %q: '*' may only be the whole leftmost label, as in *.example.com", p)
	}
	if !validHost(rest) {
		return nil, fmt.Errorf("host pattern %q is not a host name (letters, digits, '-', '_' in non-empty labels, or an IP address)", p)
	}
	if rest != h {
		if strings.Contains(rest, ":") {
			return nil, fmt.Errorf("host pattern %q: an IPv6 address takes no '*'", p)
		}
		m.suffix = "." + rest
	} else {
		m.exact = h
	}
	return m, nil
}

func (m *hostMatcher) match(v string, strict bool) (bool, string) {
	h := strings.TrimSuffix(asciiLower(v), ".")
	if h == "" {
		return false, "it is empty"
	}
	if strict && !validHost(h) {
		return false, "it is not a plain host name, and an allow pattern only matches those"
	}
	switch {
	case m.any:
		return true, ""
	case m.suffix != "":
		return len(h) > len(m.suffix) && strings.HasSuffix(h, m.suffix), ""
	}
	return h == m.exact, ""
}

// asciiLower lower-cases ASCII letters only, so that no Unicode case folding
// (the Kelvin sign K to k, for one) can turn a look-alike into a match.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// validHost: an IP address, or non-empty dot-separated labels of
// [a-z0-9_-]. A ':' is only good inside an IPv6 address, so that nothing
// like "evil.com:1.example.com" passes for a name under example.com.
func validHost(h string) bool {
	if h == "" {
		return false
	}
	if strings.Contains(h, ":") {
		_, err := netip.ParseAddr(h)
		return err == nil
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
