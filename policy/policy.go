package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Kind says how a field's patterns match.
type Kind int

const (
	Text Kind = iota // glob: * matches any run of characters (including '/'), ? one character; \ escapes
	Host             // a host name: case-insensitive, trailing dot ignored, label-aware
	Path             // a URL or file path: '*' and '?' stay within one '/'-separated segment, '**' spans segments
)

func (k Kind) String() string {
	switch k {
	case Text:
		return "text"
	case Host:
		return "host"
	case Path:
		return "path"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Tool is what a rules file may name: a tool and the fields its rules may match.
type Tool struct {
	Name   string
	Fields map[string]Kind
	// Family marks Name as the prefix of tools not known until they
	// appear ("mcp.github." for an MCP server's): rules may name them, or
	// a prefix of them, and any field, matched as Text.
	Family bool
}

// Action is what a rule, or a Decision, says to do with a tool call.
type Action string

const (
	Deny  Action = "deny"
	Ask   Action = "ask"
	Allow Action = "allow"
	None  Action = ""
)

// lists are the rule lists in the order Decide checks them.
var lists = [...]Action{Deny, Ask, Allow}

// Rule is one rule as written. Line is its line in the file (1-based), Index
// its place in its list (1-based, as in "deny rule 2"), File the name the
// rules were parsed under. Fields maps a field name to its patterns: one for a
// plain string, several for a list (any of them matches).
type Rule struct {
	Action Action
	Tool   string
	Fields map[string][]string
	Reason string
	Line   int
	Index  int
	File   string

	prefix bool             // Tool ends in '*': match names starting with toolName
	name   string           // Tool without its '*'
	fields []*fieldPatterns // sorted by name
	family bool             // names tools of a family (Tool.Family)
}

type fieldPatterns struct {
	name     string
	patterns []string
	// compiled[kind][i] is patterns[i] compiled for kind; a rule naming a
	// tool prefix may cover tools that give the field different kinds.
	compiled map[Kind][]matcher
}

// String gives the rule as a line for logs and Explain, fields in name order:
//
//	rules.yaml:12: deny web-fetch.fetch host="*.corp.example"
func (r *Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: %s %s", r.File, r.Line, r.Action, r.Tool)
	names := make([]string, 0, len(r.Fields))
	for n := range r.Fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ps := r.Fields[n]
		if len(ps) == 1 {
			fmt.Fprintf(&b, " %s=%q", n, ps[0])
			continue
		}
		q := make([]string, len(ps))
		for i, p := range ps {
			q[i] = strconv.Quote(p)
		}
		fmt.Fprintf(&b, " %s=[%s]", n, strings.Join(q, ", "))
	}
	return b.String()
}

// where names the rule for a person: "deny rule 2 (rules.yaml:12)".
func (r *Rule) where() string {
	return fmt.Sprintf("%s rule %d (%s:%d)", r.Action, r.Index, r.File, r.Line)
}

// Decision is what Decide found.
type Decision struct {
	Action Action
	Rule   *Rule  // nil when Action is None
	Why    string // one sentence a person reads: which rule and why it matched, or "no rule matches"
}

// Rules is a parsed rules file. It is not changed after Parse, so one Rules
// may be used from many goroutines at once. A nil *Rules has no rules.
type Rules struct {
	file     string
	tools    map[string]map[string]Kind
	families []string // prefixes of tools known only later (Tool.Family)
	lists    [len(lists)][]*Rule
}

// Len is the number of rules in all three lists.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	n := 0
	for _, l := range r.lists {
		n += len(l)
	}
	return n
}

// Decide checks the deny rules, then the ask rules, then the allow rules, each
// list in file order, and returns the first rule that matches; Action None
// (and Rule nil) when none does. A rule matches when its tool matches and
// every field it names is in fields and matches one of its patterns.
func (r *Rules) Decide(tool string, fields map[string]string) Decision {
	if r != nil {
		for li := range r.lists {
			for _, rule := range r.lists[li] {
				if ok, why := r.check(rule, tool, fields); ok {
					s := rule.where() + " matches: " + why
					if rule.Reason != "" {
						s += " (" + rule.Reason + ")"
					}
					return Decision{Action: rule.Action, Rule: rule, Why: s}
				}
			}
		}
	}
	return Decision{Action: None, Why: "no rule matches"}
}

// Explain checks every rule, in the order Decide does, and gives one line for
// each: the rule, then "matches" or "does not match: " and the first reason
// it does not. The last line is the decision.
func (r *Rules) Explain(tool string, fields map[string]string) []string {
	var out []string
	if r != nil {
		for li := range r.lists {
			for _, rule := range r.lists[li] {
				ok, why := r.check(rule, tool, fields)
				if ok {
					out = append(out, rule.String()+": matches")
				} else {
					out = append(out, rule.String()+": does not match: "+why)
				}
			}
		}
	}
	d := r.Decide(tool, fields)
	if d.Action == None {
		return append(out, "decision: none: no rule matches")
	}
	return append(out, "decision: "+string(d.Action)+": "+d.Why)
}

// check says whether rule matches the call and why (or why not), in words.
func (r *Rules) check(rule *Rule, tool string, fields map[string]string) (bool, string) {
	if rule.prefix {
		if !strings.HasPrefix(tool, rule.name) {
			return false, fmt.Sprintf("tool %q does not start with %q", tool, rule.name)
		}
	} else if tool != rule.name {
		return false, fmt.Sprintf("tool %q is not %q", tool, rule.name)
	}
	kinds, known := r.tools[tool]
	if !known && r.family(tool) {
		known = true // every field of a family member is Text: kinds[f] is Text, the zero Kind
	}
	if !known {
		// A tool the rules were not loaded with: its fields have no kind to
		// match by. Only deny and ask rules that name no field apply.
		if rule.Action == Allow {
			return false, fmt.Sprintf("tool %q was not known when the rules were loaded, and allow rules apply only to known tools", tool)
		}
		if len(rule.fields) > 0 {
			return false, fmt.Sprintf("tool %q was not known when the rules were loaded, so its fields cannot be matched", tool)
		}
	}
	parts := []string{fmt.Sprintf("tool %q", tool)}
	if rule.prefix {
		parts[0] = fmt.Sprintf("tool %q matches %q", tool, rule.Tool)
	}
	for _, fp := range rule.fields {
		v, present := fields[fp.name]
		if !present {
			return false, fmt.Sprintf("the call has no %s", fp.name)
		}
		ms := fp.compiled[kinds[fp.name]]
		matched := -1
		var notes []string
		for i, m := range ms {
			ok, note := m.match(v, rule.Action == Allow)
			if ok {
				matched = i
				break
			}
			if note != "" {
				notes = append(notes, note)
			}
		}
		if matched < 0 {
			s := fmt.Sprintf("%s %q is not %s", fp.name, v, quoteAlternatives(fp.patterns))
			if len(notes) > 0 {
				s += ": " + strings.Join(notes, "; ")
			}
			return false, s
		}
		parts = append(parts, fmt.Sprintf("%s %q matches %q", fp.name, v, fp.patterns[matched]))
	}
	return true, strings.Join(parts, ", ")
}

// family reports whether tool belongs to a family of tools known only
// later.
func (r *Rules) family(tool string) bool {
	for _, f := range r.families {
		if strings.HasPrefix(tool, f) {
			return true
		}
	}
	return false
}

func quoteAlternatives(ps []string) string {
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = strconv.Quote(p)
	}
	if len(q) == 1 {
		return q[0]
	}
	return "any of " + strings.Join(q, ", ")
}
