package policy

import (
	"fmt"
	"strings"

	"tollgate/prompt"
)

// ToolsOf describes tools for Parse: every top-level property of a tool's
// input schema is a Text field, unless the tool's Fields give it another
// kind, and the tool's Fields add the ones its Derive computes.
func ToolsOf(tools []*prompt.Tool) []Tool {
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		fields := map[string]Kind{}
		if t.Schema != nil {
			for name := range t.Schema.Properties {
				fields[name] = Text
			}
		}
		for _, f := range t.Fields {
			fields[f.Name] = kindOf(f.Kind)
		}
		out = append(out, Tool{Name: t.Name, Fields: fields})
	}
	return out
}

func kindOf(k prompt.FieldKind) Kind {
	switch k {
	case prompt.FieldHost:
		return Host
	case prompt.FieldPath:
		return Path
	}
	return Text
}

// Checker is Rules as the prompt service asks them: it implements
// prompt.Policy. A nil Rules allows nothing and denies nothing.
type Checker struct{ Rules *Rules }

var _ prompt.Policy = Checker{}

// Check implements prompt.Policy.
func (c Checker) Check(tool string, fields map[string]string) prompt.Verdict {
	d := c.Rules.Decide(tool, fields)
	if d.Action == None {
		return prompt.Verdict{}
	}
	v := prompt.Verdict{Action: prompt.PolicyAction(d.Action), Source: fmt.Sprintf("%s:%d", d.Rule.File, d.Rule.Line), Why: d.Why}
	if d.Rule.Reason != "" {
		v.Why = d.Rule.Reason
	}
	return v
}

// DenyTools removes from tools those that patterns name (a tool name, or a
// prefix ending in '*'), so that the model is never offered them. A pattern
// with '*' elsewhere, or one that names no tool, is an error: a typo must
// not leave a tool the operator meant to block on offer. A pattern within
// one of families (prefixes of tools known only later, an MCP server's)
// may name no tool yet; Denied filters those as they come.
func DenyTools(tools []*prompt.Tool, patterns []string, families ...string) ([]*prompt.Tool, error) {
	denied, ps, err := denier(patterns)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	var kept []*prompt.Tool
	for _, t := range tools {
		if p, ok := denied(t.Name); ok {
			used[p] = true
			continue
		}
		kept = append(kept, t)
	}
	for _, p := range ps {
		if used[p.raw] || p.inFamily(families) {
			continue
		}
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
		}
		return nil, fmt.Errorf("%q names no tool (tools: %s)", p.raw, strings.Join(names, ", "))
	}
	return kept, nil
}

// Denied returns whether patterns (as DenyTools reads them) block a tool
// by name: for tools that join later.
func Denied(patterns []string) (func(name string) bool, error) {
	denied, _, err := denier(patterns)
	if err != nil {
		return nil, err
	}
	return func(name string) bool { _, ok := denied(name); return ok }, nil
}

type denyPattern struct {
	raw, prefix string
	star        bool
}

func (p denyPattern) inFamily(families []string) bool {
	for _, f := range families {
		if strings.HasPrefix(p.prefix, f) || p.star && strings.HasPrefix(f, p.prefix) {
			return true
		}
	}
	return false
}

func denier(patterns []string) (func(string) (string, bool), []denyPattern, error) {
	var ps []denyPattern
	for _, raw := range patterns {
		p := strings.TrimSpace(raw)
		if p == "" {
			continue
		}
		prefix, star := strings.CutSuffix(p, "*")
		if strings.Contains(prefix, "*") {
			return nil, nil, fmt.Errorf("%q: '*' may only end a pattern (web-fetch.*)", p)
		}
		ps = append(ps, denyPattern{raw: p, prefix: prefix, star: star})
	}
	return func(name string) (string, bool) {
		for _, p := range ps {
			if name == p.prefix || (p.star && strings.HasPrefix(name, p.prefix)) {
				return p.raw, true
			}
		}
		return "", false
	}, ps, nil
}
