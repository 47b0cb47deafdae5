package llm

import (
	"fmt"
	"strings"
)

// The OpenAI API accepts tool names matching ^[a-zA-Z0-9_-]{1,64}$, but our
// names are namespaced with a dot ("web-fetch.fetch"). WireName encodes a
// name with a prefix code: every character stands for itself except
//
//	'.' → "__"
//	'_' → "_-"
//
// No codeword is a prefix of another ('_' alone is none), so every encoded
// string decodes in exactly one way: the mapping is reversible and two
// names never share a wire name. The common case, a name with dashes and
// one dot, reads naturally to the model: "web-fetch__fetch".

// maxWireName is the API's limit on a tool name.
const maxWireName = 64

// WireName returns the name a tool has on the wire. It fails when name has
// a character outside [a-zA-Z0-9_.-], is empty, or is longer than 64
// characters once encoded.
func WireName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("tool name is empty")
	}
	var b strings.Builder
	b.Grow(len(name) + 4)
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			b.WriteString("__")
		case c == '_':
			b.WriteString("_-")
		case isWireChar(c):
			b.WriteByte(c)
		default:
			return "", fmt.Errorf("tool name %q: character %q is not allowed", name, c)
		}
	}
	if b.Len() > maxWireName {
		return "", fmt.Errorf("tool name %q is %d characters once encoded for the API (%s), more than its limit of %d",
			name, b.Len(), b.String(), maxWireName)
	}
	return b.String(), nil
}

// ToolName reverses WireName. It reports false when wire is not the
// encoding of any name, as when a model invents a tool.
func ToolName(wire string) (string, bool) {
	if wire == "" {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(wire))
	for i := 0; i < len(wire); i++ {
		c := wire[i]
		switch {
		case c == '_':
			if i+1 == len(wire) {
				return "", false
			}
			i++
			switch wire[i] {
			case '_':
				b.WriteByte('.')
			case '-':
				b.WriteByte('_')
			default:
				return "", false
			}
		case isWireChar(c):
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return b.String(), true
}

// isWireChar reports whether c stands for itself in a wire name.
func isWireChar(c byte) bool {
	return c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
