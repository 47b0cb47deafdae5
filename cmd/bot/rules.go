package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"os"

	"tollgate/policy"
	"tollgate/prompt"
	"tollgate/tools/files"
	"tollgate/tools/shell"
	"tollgate/tools/webfetch"
)

// operatorPolicy applies APPROVAL_DENY_TOOLS to tools and reads
// APPROVAL_RULES against what remains, so a rule naming a blocked tool is
// an error too. families are prefixes of tools known only later (an MCP
// server's: "mcp.NAME."), which rules and the deny list may name before
// they appear. It returns the tools to offer, the rules (nil: none) and
// whether a tool that joins later is blocked.
func operatorPolicy(cfg config, tools []*prompt.Tool, families ...string) ([]*prompt.Tool, prompt.Policy, func(string) bool, error) {
	tools, err := policy.DenyTools(tools, cfg.ApprovalDenyTools, families...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("APPROVAL_DENY_TOOLS: %w", err)
	}
	denied, err := policy.Denied(cfg.ApprovalDenyTools)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("APPROVAL_DENY_TOOLS: %w", err) // not reached: checked above
	}
	if cfg.ApprovalRules == "" {
		return tools, nil, denied, nil
	}
	desc := policy.ToolsOf(tools)
	for _, f := range families {
		desc = append(desc, policy.Tool{Name: f, Family: true})
	}
	rules, err := policy.Load(cfg.ApprovalRules, desc)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("APPROVAL_RULES: %w", err)
	}
	return tools, policy.Checker{Rules: rules}, denied, nil
}

// allTools is every tool Tollgate can offer, whether or not this
// configuration enables it, built without a database or a network, for
// checking a rules file against: a rules file written for the file tools
// is checked even where FILES_ROOTS is unset.
func allTools(ctx context.Context) ([]*prompt.Tool, error) {
	f, err := webfetch.New(ctx, webfetch.Config{Store: webfetch.NewMemStore()})
	if err != nil {
		return nil, err
	}
	tools := f.Tools()
	dir, err := os.MkdirTemp("", "tollgate-rules-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fs, err := files.New(ctx, files.Config{Roots: []files.Root{{Name: "root", Path: dir, Writable: true}}})
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	tools = append(tools, fs.Tools()...)
	sh, err := shell.New(shell.Config{Dir: dir})
	if err != nil {
		// No bash here: a rules file for the shell tool cannot be checked
		// on this machine, but one for the others still can.
		return tools, nil
	}
	return append(tools, sh.Tools()...), nil
}

// runRules is "bot rules check FILE" (is the file valid?) and "bot rules
// explain FILE TOOL JSON" (which rule decides that call, and why). Neither
// needs a token or a database.
func runRules(ctx context.Context, args []string, stdout io.Writer) error {
	const usage = "usage: bot rules check FILE | bot rules explain FILE TOOL 'JSON'"
	if len(args) < 2 {
		return fmt.Errorf("bad arguments %q (%s)", args, usage)
	}
	tools, err := allTools(ctx)
	if err != nil {
		return err
	}
	rules, err := policy.Load(args[1], policy.ToolsOf(tools))
	if err != nil {
		return err
	}
	switch {
	case args[0] == "check" && len(args) == 2:
		fmt.Fprintf(stdout, "%s: ok, %d rules\n", args[1], rules.Len())
		return nil
	case args[0] == "explain" && len(args) == 4:
	default:
		return fmt.Errorf("bad arguments %q (%s)", args, usage)
	}
	var tool *prompt.Tool
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
		if t.Name == args[2] {
			tool = t
		}
	}
	if tool == nil {
		return fmt.Errorf("no tool %q (tools: %s)", args[2], strings.Join(names, ", "))
	}
	if !json.Valid([]byte(args[3])) {
		return fmt.Errorf("the input %q is not JSON", args[3])
	}
	fields, err := prompt.CallFields(tool, json.RawMessage(args[3]))
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(stdout, "field %s = %q\n", k, fields[k])
	}
	for _, line := range rules.Explain(tool.Name, fields) {
		fmt.Fprintln(stdout, line)
	}
	if tool.Parts == nil {
		return nil
	}
	// A tool with parts (a shell chain) is judged part by part too: say
	// what decides each, then the call.
	parts, err := tool.Parts(json.RawMessage(args[3]))
	if err != nil {
		fmt.Fprintf(stdout, "parts: none (%v): no rule can allow the call; it asks\n", err)
	}
	for _, p := range parts {
		pf := maps.Clone(fields)
		maps.Copy(pf, p.Fields)
		lines := rules.Explain(tool.Name, pf)
		note := ""
		if p.Dynamic {
			note = " (decided only when it runs: no rule allows it)"
		}
		fmt.Fprintf(stdout, "part %q%s: %s\n", p.Label, note, lines[len(lines)-1])
	}
	v, err := prompt.CheckCall(policy.Checker{Rules: rules}, tool, json.RawMessage(args[3]))
	if err != nil {
		return err
	}
	switch v.Action {
	case prompt.PolicyNone:
		fmt.Fprintln(stdout, "call: no rule decides it; grants and the tool's own check do")
	default:
		fmt.Fprintf(stdout, "call: %s: %s\n", v.Action, v.Why)
	}
	return nil
}
