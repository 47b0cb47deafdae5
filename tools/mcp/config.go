package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Config is the MCP servers the bot connects to (MCP_SERVERS).
type Config struct {
	// Servers are in name order; a disabled one is not among them.
	Servers []Server
}

// Server is one MCP server: a command run over stdio (Command set) or a
// streamable HTTP endpoint (URL set), never both.
type Server struct {
	// Name is the key in mcpServers; it becomes part of each tool's name
	// ("mcp.<Name>.<tool>").
	Name string
	// Command, Args, Env and Dir start a stdio server. Env is all of the
	// environment it gets besides PATH and HOME: the bot's own secrets
	// are never passed on.
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	// URL and Headers reach a streamable HTTP server.
	URL     string
	Headers map[string]string
	// TrustHints lets a tool the server marks readOnlyHint run without
	// asking. Off: every tool of the server asks unless a rule or grant
	// allows the call.
	TrustHints bool
}

// serverName keeps a server's name fit to stand inside a tool name.
var serverName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

// ParseConfig reads the file at path. See ParseConfigBytes.
func ParseConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("mcp config: %w", err)
	}
	return ParseConfigBytes(path, data)
}

// ParseConfigBytes parses data, named name in its errors, in the format
// other MCP clients read:
//
//	{"mcpServers": {
//	  "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"], "env": {"K": "v"}},
//	  "search": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer …"}, "trustHints": true}
//	}}
//
// Besides those fields a server may have "type" ("stdio", "http" or
// "streamable-http", agreeing with command or url), "cwd", and
// "disabled" (true: left out). Any other field, a duplicate key, a
// server with both or neither of command and url, a URL that is not
// http(s), and a name outside [a-zA-Z0-9_-]{1,32} are errors that name
// the file, the server and the field. Keys beside "mcpServers" at the
// top are ignored, so a file shared with another client still reads.
func ParseConfigBytes(name string, data []byte) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("mcp config %s: "+format, append([]any{name}, args...)...)
	}
	top, err := objectFields(data)
	if err != nil {
		return fail("%v", err)
	}
	raw, ok := lookup(top, "mcpServers")
	if !ok {
		return fail(`no "mcpServers" object`)
	}
	servers, err := objectFields(raw)
	if err != nil {
		return fail("mcpServers: %v", err)
	}
	var cfg Config
	for _, f := range servers {
		if !serverName.MatchString(f.key) {
			return fail("server %q: the name must match %s (it becomes part of tool names)", f.key, serverName)
		}
		s, disabled, err := parseServer(f.key, f.value)
		if err != nil {
			return fail("server %q: %v", f.key, err)
		}
		if !disabled {
			cfg.Servers = append(cfg.Servers, s)
		}
	}
	slices.SortFunc(cfg.Servers, func(a, b Server) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return cfg, nil
}

func parseServer(name string, data []byte) (s Server, disabled bool, err error) {
	fields, err := objectFields(data)
	if err != nil {
		return s, false, err
	}
	s.Name = name
	var kind string
	for _, f := range fields {
		var err error
		switch f.key {
		case "command":
			err = decodeInto(f.value, &s.Command)
		case "args":
			err = decodeInto(f.value, &s.Args)
		case "env":
			s.Env, err = stringMap(f.value)
			for k, v := range s.Env {
				if err == nil && (k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0)) {
					err = fmt.Errorf("%q: not a variable a process can be given", k)
				}
			}
		case "cwd":
			err = decodeInto(f.value, &s.Dir)
		case "url":
			err = decodeInto(f.value, &s.URL)
		case "headers":
			s.Headers, err = stringMap(f.value)
			for k := range s.Headers {
				if err == nil && !httpguts.ValidHeaderFieldName(k) {
					err = fmt.Errorf("%q is not a header name", k)
				}
			}
			for k, v := range s.Headers {
				if err == nil && !httpguts.ValidHeaderFieldValue(v) {
					err = fmt.Errorf("the value of %q is not a valid header value", k)
				}
			}
		case "trustHints":
			err = decodeInto(f.value, &s.TrustHints)
		case "disabled":
			err = decodeInto(f.value, &disabled)
		case "type":
			err = decodeInto(f.value, &kind)
			if err == nil && kind != "stdio" && kind != "http" && kind != "streamable-http" && kind != "streamableHttp" {
				err = fmt.Errorf("%q is not stdio, http or streamable-http (the older SSE transport is not supported)", kind)
			}
		case "timeout":
			err = errors.New("not supported: MCP_TIMEOUT bounds the calls of every server")
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return s, false, fmt.Errorf("%s: %w", f.key, err)
		}
	}
	switch {
	case s.Command == "" && s.URL == "":
		return s, false, errors.New(`neither "command" (stdio) nor "url" (streamable HTTP)`)
	case s.Command != "" && s.URL != "":
		return s, false, errors.New(`both "command" and "url": a server is one or the other`)
	case s.Command != "" && (kind != "" && kind != "stdio"):
		return s, false, fmt.Errorf("type: %q, but the server has a command (stdio)", kind)
	case s.URL != "" && kind == "stdio":
		return s, false, errors.New(`type: "stdio", but the server has a url`)
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != ""):
		return s, false, errors.New(`args, env and cwd are for a command; this server has a url`)
	case s.Command != "" && len(s.Headers) > 0:
		return s, false, errors.New(`headers are for a url; this server has a command`)
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil {
			return s, false, fmt.Errorf("url: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, false, fmt.Errorf("url: %q is not an http or https URL", s.URL)
		}
	}
	return s, disabled, nil
}

// field is one member of a JSON object, in the order written.
type field struct {
	key   string
	value json.RawMessage
}

// objectFields splits a JSON object into its members and refuses a key
// written twice: encoding/json would keep the last, and an operator who
// reads the file top-down may stop at the first.
func objectFields(data []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []field
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON: %w", err)
		}
		key := tok.(string) // inside an object, a token at this place is a key
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: not JSON: %w", key, err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%s: written twice", key)
		}
		seen[key] = true
		out = append(out, field{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON object")
	}
	return out, nil
}

func lookup(fields []field, key string) (json.RawMessage, bool) {
	for _, f := range fields {
		if f.key == key {
			return f.value, true
		}
	}
	return nil, false
}

// decodeInto decodes v strictly: a number where a string belongs is an
// error, not a zero value.
func decodeInto(data json.RawMessage, v any) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return errors.New("null")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("a JSON %s where %s belongs", te.Value, te.Type)
		}
		return err
	}
	return nil
}

// stringMap decodes an object of strings, naming the key whose value is
// not one (a number or a boolean in "env" is a common slip).
func stringMap(data json.RawMessage) (map[string]string, error) {
	fields, err := objectFields(data)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(fields))
	for _, f := range fields {
		var s string
		if err := decodeInto(f.value, &s); err != nil {
			return nil, fmt.Errorf("%s: the value must be a string", f.key)
		}
		m[f.key] = s
	}
	return m, nil
}
