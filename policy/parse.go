package policy

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Error is one problem in a rules file. Parse and Load return every problem
// they find, joined with errors.Join; errors.As finds the first *Error.
type Error struct {
	File string
	Line int    // 1-based; 0 when the problem has no line
	List Action // the list the problem is in; None at the top level
	Rule int    // 1-based place of the rule in List; 0 when not about one rule
	Msg  string
}

// Error reads like "rules.yaml:7: deny rule 2: unknown field ...".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	switch {
	case e.List != None && e.Rule > 0:
		fmt.Fprintf(&b, "%s rule %d: ", e.List, e.Rule)
	case e.List != None:
		fmt.Fprintf(&b, "%s: ", e.List)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads the rules file at path and parses it; see Parse.
func Load(path string, tools []Tool) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(path, data, tools)
}

// Parse reads a rules file, checking it against tools: every rule must name
// one of them (or a prefix of some) and only fields they all have. name is
// used in errors and in Rule.File. It returns every problem found.
func Parse(name string, data []byte, tools []Tool) (*Rules, error) {
	var families, known []Tool
	for _, t := range tools {
		if t.Family {
			families = append(families, t)
		} else {
			known = append(known, t)
		}
	}
	reg, err := registry(known)
	if err != nil {
		return nil, err
	}
	p := &parse{rules: &Rules{file: name, tools: reg}}
	for _, f := range families {
		if f.Name == "" || strings.Contains(f.Name, "*") {
			return nil, fmt.Errorf("policy: family %q must be a plain prefix", f.Name)
		}
		p.rules.families = append(p.rules.families, f.Name)
	}
	p.file(name, data)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return p.rules, nil
}

func registry(tools []Tool) (map[string]map[string]Kind, error) {
	reg := make(map[string]map[string]Kind, len(tools))
	for _, t := range tools {
		switch {
		case t.Name == "":
			return nil, errors.New("policy: a tool has no name")
		case strings.Contains(t.Name, "*"):
			return nil, fmt.Errorf("policy: tool name %q has a '*'", t.Name)
		case reg[t.Name] != nil:
			return nil, fmt.Errorf("policy: tool %q is listed twice", t.Name)
		}
		fields := make(map[string]Kind, len(t.Fields))
		for f, k := range t.Fields {
			switch {
			case f == "" || f == "tool" || f == "reason":
				return nil, fmt.Errorf("policy: tool %q: %q cannot be a field name", t.Name, f)
			case k != Text && k != Host && k != Path:
				return nil, fmt.Errorf("policy: tool %q: field %q has unknown kind %d", t.Name, f, int(k))
			}
			fields[f] = k
		}
		reg[t.Name] = fields
	}
	return reg, nil
}

type parse struct {
	rules *Rules
	errs  []error
	// where the errors being made now belong
	list Action
	rule int
}

func (p *parse) errorf(n ast.Node, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.rules.file, Line: line(n), List: p.list, Rule: p.rule, Msg: fmt.Sprintf(format, args...)})
}

func line(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

func (p *parse) file(name string, data []byte) {
	f, err := parseYAML(data)
	if err != nil {
		e := &Error{File: name, Msg: "malformed YAML: " + err.Error()}
		var ye yaml.Error
		if errors.As(err, &ye) {
			e.Msg = "malformed YAML: " + ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				e.Line = tk.Position.Line
			}
		}
		p.errs = append(p.errs, e)
		return
	}
	var body ast.Node
	for i, doc := range f.Docs {
		if i == 0 {
			body = doc.Body
			continue
		}
		n := ast.Node(doc)
		if doc.Body != nil {
			n = doc.Body
		}
		p.errorf(n, "a rules file holds one YAML document, and this is a second")
		return
	}
	if body == nil {
		return // empty, or only comments: no rules
	}
	pairs, ok := mapping(body)
	if !ok {
		p.errorf(body, "the file must be a mapping with the keys deny, ask and allow, not %s", describe(body))
		return
	}
	seen := map[string]int{}
	for _, kv := range pairs {
		key, ok := p.key(kv)
		if !ok {
			continue
		}
		var list Action
		switch key {
		case "deny":
			list = Deny
		case "ask":
			list = Ask
		case "allow":
			list = Allow
		default:
			p.errorf(kv.Key, "unknown top-level key %q (keys: deny, ask, allow)", key)
			continue
		}
		if first, dup := seen[key]; dup {
			p.errorf(kv.Key, "duplicate top-level key %q (first on line %d)", key, first)
			continue
		}
		seen[key] = line(kv.Key)
		p.list = list
		p.ruleList(list, kv.Value)
		p.list = None
	}
}

// parseYAML parses without the parser's own duplicate-key error, which names
// no rule; rule keys are checked for duplicates here.
func parseYAML(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("parser failed: %v", r)
		}
	}()
	return parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
}

func mapping(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

// describe names a node's type for an error.
func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return "a string"
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.NullNode:
		return "null"
	case *ast.AliasNode:
		return "a YAML alias (an unquoted value that starts with '*' is one: quote it)"
	case *ast.AnchorNode:
		return "a YAML anchor (not supported)"
	case *ast.TagNode:
		return "a tagged value (YAML tags are not supported)"
	}
	return "a " + n.Type().String()
}

// key reads a mapping key, which must be a plain or quoted string.
func (p *parse) key(kv *ast.MappingValueNode) (string, bool) {
	if s, ok := kv.Key.(*ast.StringNode); ok {
		return s.Value, true
	}
	p.errorf(kv.Key, "a key must be a string, not %s", describe(kv.Key))
	return "", false
}

func (p *parse) ruleList(list Action, n ast.Node) {
	switch s := n.(type) {
	case *ast.NullNode:
		return // "deny:" with nothing under it: no rules
	case *ast.SequenceNode:
		for i, item := range s.Values {
			p.rule = i + 1
			if r := p.ruleOf(list, item); r != nil {
				li := 0
				for li < len(lists) && lists[li] != list {
					li++
				}
				p.rules.lists[li] = append(p.rules.lists[li], r)
			}
			p.rule = 0
		}
	default:
		p.errorf(n, "must be a list of rules, not %s", describe(n))
	}
}

func (p *parse) ruleOf(list Action, n ast.Node) *Rule {
	pairs, ok := mapping(n)
	if !ok {
		p.errorf(n, "a rule must be a mapping with a tool key, not %s", describe(n))
		return nil
	}
	errs := len(p.errs)
	r := &Rule{Action: list, Index: p.rule, Line: line(n), File: p.rules.file, Fields: map[string][]string{}}
	seen := map[string]int{}
	var toolNode ast.Node
	var fieldKeys []*ast.MappingValueNode
	for _, kv := range pairs {
		key, ok := p.key(kv)
		if !ok {
			continue
		}
		if first, dup := seen[key]; dup {
			p.errorf(kv.Key, "duplicate key %q (first on line %d)", key, first)
			continue
		}
		seen[key] = line(kv.Key)
		switch key {
		case "tool":
			toolNode = kv.Key
			if s, ok := kv.Value.(*ast.StringNode); ok && s.Value != "" {
				r.Tool = s.Value
			} else if ok {
				p.errorf(kv.Value, "tool is empty")
			} else {
				p.errorf(kv.Value, "tool must be a string, not %s", describe(kv.Value))
			}
		case "reason":
			switch s := kv.Value.(type) {
			case *ast.StringNode:
				r.Reason = s.Value
			case *ast.LiteralNode:
				r.Reason = strings.TrimSpace(s.Value.Value)
			default:
				p.errorf(kv.Value, "reason must be a string, not %s", describe(kv.Value))
			}
		default:
			fieldKeys = append(fieldKeys, kv)
		}
	}
	if toolNode == nil {
		p.errorf(n, "missing tool (every rule names the tool it is for)")
		return nil
	}
	tools := p.toolsFor(r, toolNode)
	for _, kv := range fieldKeys {
		p.field(r, tools, kv)
	}
	if len(p.errs) > errs {
		return nil
	}
	sort.Slice(r.fields, func(i, j int) bool { return r.fields[i].name < r.fields[j].name })
	return r
}

// toolsFor checks the rule's tool pattern and returns the known tools it
// names, in name order; nil after an error.
func (p *parse) toolsFor(r *Rule, at ast.Node) []string {
	if r.Tool == "" {
		return nil // already reported
	}
	r.name = r.Tool
	if i := strings.IndexByte(r.Tool, '*'); i >= 0 {
		if i != len(r.Tool)-1 {
			p.errorf(at, "tool %q: '*' may only end a tool name, as in \"web-fetch.*\"", r.Tool)
			return nil
		}
		r.prefix, r.name = true, r.Tool[:i]
	}
	var names, all []string
	for t := range p.rules.tools {
		all = append(all, t)
		if t == r.name || r.prefix && strings.HasPrefix(t, r.name) {
			names = append(names, t)
		}
	}
	sort.Strings(all)
	sort.Strings(names)
	for _, f := range p.rules.families {
		// A rule within a family, or a prefix over one, names tools that
		// are known only later: accepted, its fields matched as Text.
		if strings.HasPrefix(r.name, f) || r.prefix && strings.HasPrefix(f, r.name) {
			r.family = true
		}
	}
	if len(names) == 0 && r.family {
		return []string{}
	}
	if len(names) == 0 {
		if r.prefix {
			p.errorf(at, "no known tool starts with %q (tools: %s)", r.name, strings.Join(all, ", "))
		} else {
			p.errorf(at, "unknown tool %q (tools: %s)", r.Tool, strings.Join(all, ", "))
		}
		return nil
	}
	return names
}

func fieldNames(fields map[string]Kind) string {
	var names []string
	for f := range fields {
		names = append(names, f)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "it has none"
	}
	return "fields: " + strings.Join(names, ", ")
}

func (p *parse) field(r *Rule, tools []string, kv *ast.MappingValueNode) {
	name := kv.Key.(*ast.StringNode).Value
	patterns, nodes := p.patterns(name, kv.Value)
	if tools == nil {
		return // the tool is wrong; the field cannot be checked
	}
	kinds := map[Kind]bool{}
	if r.family {
		kinds[Text] = true
	}
	for _, t := range tools {
		k, ok := p.rules.tools[t][name]
		if !ok {
			if !r.prefix {
				p.errorf(kv.Key, "unknown field %q for %s (%s)", name, t, fieldNames(p.rules.tools[t]))
			} else {
				p.errorf(kv.Key, "field %q is not a field of every tool matching %q: %s has no %s (%s)", name, r.Tool, t, name, fieldNames(p.rules.tools[t]))
			}
			return
		}
		kinds[k] = true
	}
	if patterns == nil {
		return
	}
	fp := &fieldPatterns{name: name, patterns: patterns, compiled: map[Kind][]matcher{}}
	for _, k := range []Kind{Text, Host, Path} {
		if !kinds[k] {
			continue
		}
		for i, pat := range patterns {
			m, err := compile(k, pat)
			if err != nil {
				p.errorf(nodes[i], "%s: bad %s pattern %q: %v", name, k, pat, err)
				return
			}
			fp.compiled[k] = append(fp.compiled[k], m)
		}
	}
	r.Fields[name] = patterns
	r.fields = append(r.fields, fp)
}

// patterns reads a field's value: a string, or a non-empty list of strings.
func (p *parse) patterns(name string, n ast.Node) ([]string, []ast.Node) {
	one := func(n ast.Node) (string, bool) {
		s, ok := n.(*ast.StringNode)
		switch {
		case !ok:
			p.errorf(n, "%s: a pattern must be a string, not %s", name, describe(n))
		case s.Value == "":
			p.errorf(n, "%s: a pattern cannot be empty", name)
		default:
			return s.Value, true
		}
		return "", false
	}
	if seq, ok := n.(*ast.SequenceNode); ok {
		if len(seq.Values) == 0 {
			p.errorf(n, "%s: an empty list of patterns matches nothing", name)
			return nil, nil
		}
		var out []string
		var nodes []ast.Node
		bad := false
		for _, v := range seq.Values {
			s, ok := one(v)
			bad = bad || !ok
			out = append(out, s)
			nodes = append(nodes, v)
		}
		if bad {
			return nil, nil
		}
		return out, nodes
	}
	if s, ok := one(n); ok {
		return []string{s}, []ast.Node{n}
	}
	return nil, nil
}
