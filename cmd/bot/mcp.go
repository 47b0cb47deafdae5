package main

import (
	"fmt"

	"tollgate/prompt"
	"tollgate/tools/mcp"
)

// deniedSource is an MCP manager less the tools APPROVAL_DENY_TOOLS
// blocks: a tool a server adds later is blocked as one listed at start.
type deniedSource struct {
	prompt.ToolSource
	denied func(name string) bool
}

func (d deniedSource) Tools() []*prompt.Tool {
	var out []*prompt.Tool
	for _, t := range d.ToolSource.Tools() {
		if !d.denied(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// mcpNotes says, for /help, which MCP servers are not running and why.
func mcpNotes(status []mcp.ServerStatus) []string {
	var notes []string
	for _, s := range status {
		if !s.Up {
			notes = append(notes, fmt.Sprintf("MCP server %s is not running, so its tools are missing: %s", s.Name, s.Err))
		}
	}
	return notes
}
