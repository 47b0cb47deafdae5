package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tollgate/prompt"
)

// toolName is prompt's rule for a tool's name, checked here so that a
// server's tool that cannot join is left out with a reason that names
// the server, rather than renamed into something the server never
// offered.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// maxDescription bounds the description of a server's tool the model
// reads with every turn.
const maxDescription = 4096

// The reasons an approval request gives for a server's tool.
const (
	reasonDestructive = "The server marks this tool destructive."
	reasonMaybe       = "The server does not say the tool is safe: it may be destructive."
	reasonNot         = "The server marks this tool not destructive (a hint, not checked)."
	reasonReadOnly    = "The server says this tool only reads, but its hints are not trusted (trustHints is off)."
)

// ToolName is the name the agent knows tool of server by.
func ToolName(server, tool string) string { return "mcp." + server + "." + tool }

// tool maps a server's tool to one of the agent's. A tool asks unless
// the operator trusts the server's hints and the server marks it
// read-only; the operator's rules and grants apply as to any tool.
func (s *server) tool(t *sdk.Tool) (*prompt.Tool, error) {
	name := ToolName(s.cfg.Name, t.Name)
	if !toolName.MatchString(name) {
		return nil, fmt.Errorf("the name %q does not fit %s", name, toolName)
	}
	schema := &jsonschema.Schema{Type: "object"}
	if t.InputSchema != nil {
		data, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		schema = new(jsonschema.Schema)
		if err := json.Unmarshal(data, schema); err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
	}
	if _, err := schema.Resolve(nil); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	desc := t.Description
	if len(desc) > maxDescription {
		desc = cut(desc, maxDescription) + "…"
	}
	pt := &prompt.Tool{
		Name:        name,
		Description: "[server " + s.cfg.Name + "] " + desc,
		Schema:      schema,
		Effect:      prompt.EffectExecute,
	}
	a := t.Annotations
	switch {
	case a != nil && a.ReadOnlyHint && s.cfg.TrustHints:
		pt.Effect = prompt.EffectRead
	case a != nil && a.ReadOnlyHint:
		pt.Gate = prompt.Always(gateReason(name, s.cfg.Name, reasonReadOnly))
	case a != nil && a.DestructiveHint != nil && *a.DestructiveHint:
		pt.Gate = prompt.Always(gateReason(name, s.cfg.Name, reasonDestructive))
	case a != nil && a.DestructiveHint != nil:
		pt.Gate = prompt.Always(gateReason(name, s.cfg.Name, reasonNot))
	default:
		// The protocol's default for a tool that does more than read is
		// destructive.
		pt.Gate = prompt.Always(gateReason(name, s.cfg.Name, reasonMaybe))
	}
	mcpName := t.Name
	pt.Invoke = func(ctx context.Context, input json.RawMessage) (string, error) {
		return s.call(ctx, mcpName, input)
	}
	return pt, nil
}

func gateReason(tool, server, hint string) string {
	return fmt.Sprintf("%s is a tool of MCP server %s. %s", tool, server, hint)
}

// call runs tool once on the session open now. It never sends a call
// again: a server that stopped during the call may have acted on it.
func (s *server) call(ctx context.Context, tool string, input json.RawMessage) (string, error) {
	sess, why := s.current()
	if sess == nil {
		if why == "" {
			why = "not started yet"
		}
		return "", fmt.Errorf("MCP server %s is not running (restarting: %s)", s.cfg.Name, why)
	}
	cctx, cancel := context.WithTimeout(ctx, s.m.timeout)
	defer cancel()
	// The SDK sends notifications/cancelled when cctx ends before the
	// result arrives, whichever of the timeout and ctx ended it.
	res, err := sess.CallTool(cctx, &sdk.CallToolParams{Name: tool, Arguments: input})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return "", fmt.Errorf("the call was cancelled: %w", context.Cause(ctx))
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return "", fmt.Errorf("timed out after %s; the call was cancelled", seconds(s.m.timeout))
	case refused(err):
		return "", fmt.Errorf("MCP server %s: %w", s.cfg.Name, err)
	default:
		// The connection failed (the server died, the network broke):
		// the server may have acted on the call. The session is of no
		// more use; the server's goroutine starts a new one.
		s.m.log.Warn("MCP call interrupted", "mcp_server", s.cfg.Name, "tool", tool, "err", err)
		s.broken(sess)
		return "", fmt.Errorf("MCP server %s stopped during the call (%v); whether it took effect is unknown, and it was not sent again", s.cfg.Name, err)
	}
	text := render(res, s.m.maxResult)
	if res.IsError {
		if text == "" {
			text = "the tool failed and said nothing more"
		}
		return "", errors.New(text)
	}
	return text, nil
}

// codeRejected is the SDK's JSON-RPC code for a message its transport
// could not deliver (an HTTP request that failed): not an answer of the
// server, and not proof the server never read the call.
const codeRejected = -32005

// refused reports whether err is the server's answer to a call it did
// not run (an unknown tool, bad input), as opposed to a failure of the
// connection, after which nobody knows.
func refused(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code != codeRejected
}

// render turns a result into the text the model reads, at most max bytes
// and a note. What cannot be text (an image, audio, a binary resource)
// is described, so the model knows it was there.
func render(res *sdk.CallToolResult, max int) string {
	var parts []string
	text := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts, text = append(parts, c.Text), true
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s (%s)]", c.URI, orUnknown(c.MIMEType)))
		case *sdk.EmbeddedResource:
			r := c.Resource
			if r == nil {
				parts = append(parts, "[resource: empty]")
				continue
			}
			if r.Blob != nil {
				parts = append(parts, fmt.Sprintf("[resource: %s (%s), %d bytes]", r.URI, orUnknown(r.MIMEType), len(r.Blob)))
				continue
			}
			parts, text = append(parts, fmt.Sprintf("[resource: %s (%s)]\n%s", r.URI, orUnknown(r.MIMEType), r.Text)), true
		default:
			parts = append(parts, fmt.Sprintf("[content of kind %T not shown]", c))
		}
	}
	if !text && res.StructuredContent != nil {
		if data, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(data))
		}
	}
	out := strings.Join(parts, "\n")
	if len(out) > max {
		out = cut(out, max) + fmt.Sprintf("\n[result cut at %d bytes of %d]", max, len(out))
	}
	return out
}

// cut returns at most n bytes of s, not splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func orUnknown(mime string) string {
	if mime == "" {
		return "type not given"
	}
	return mime
}

// seconds writes a timeout as an operator set it: "60s", not "1m0s".
func seconds(d time.Duration) string {
	if d >= time.Second && d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
