package prompt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Requirement is a gate's verdict on one call.
type Requirement struct {
	Required bool
	Reason   string // shown to the human who decides
	// Preview is what the call will do, shown whole with the request (a
	// unified diff of a file change); empty: the input says it all.
	// PreviewName names it when it is attached as a file ("change.diff").
	Preview, PreviewName string
	// Expect is what the tool needs to find again when the approved call
	// runs (the hash of the file the diff was made from); Invoke reads it
	// as CallInfo.Expect and refuses to act if the world moved on.
	Expect string
}

// Effect is what a tool does to the world: without a rule or a gate of
// its own, a tool that only reads runs without asking and any other asks.
type Effect string

// The effects.
const (
	EffectRead    Effect = "read"
	EffectWrite   Effect = "write"
	EffectExecute Effect = "execute"
	EffectSend    Effect = "send"
)

// Part is one piece of a call that rules judge on its own: one command
// of a shell chain. Label is how it is shown; Dynamic marks a piece whose
// meaning is not known before it runs (a command name built from a
// variable), which no rule can allow.
type Part struct {
	Label   string
	Fields  map[string]string
	Dynamic bool
}

// Gate decides whether a call needs a human. It sees the validated input.
// An error becomes an error result for the model; the tool does not run.
type Gate func(ctx context.Context, input json.RawMessage) (Requirement, error)

// Always returns a static gate that asks a human every time.
func Always(reason string) Gate {
	r := Requirement{Required: true, Reason: reason}
	return func(context.Context, json.RawMessage) (Requirement, error) { return r, nil }
}

// Tool is something the model may call.
type Tool struct {
	// Name is namespaced, like "web-fetch.fetch".
	Name        string
	Description string
	// Schema describes the input; input is validated against it before the
	// gate runs.
	Schema *jsonschema.Schema
	// Gate decides whether a call needs a human; nil: Effect decides.
	Gate Gate
	// Effect says what the tool does; a tool without a Gate asks for every
	// call unless it only reads. Empty is EffectRead for a tool without a
	// Gate (as before effects were declared), EffectSend for one with.
	Effect Effect
	// Invoke runs the call and returns text for the model. Its error becomes
	// an error result the model sees.
	Invoke func(ctx context.Context, input json.RawMessage) (string, error)
	// Scope says what an "always" approval of a call covers beyond that
	// call (web-fetch: the URL's host); nil: the exact input and no more.
	// It sees the validated input.
	Scope func(input json.RawMessage) (Scope, error)
	// NoGrants withholds "always": for a tool whose approval already
	// grants something lasting (adding a domain to an allowlist).
	NoGrants bool
	// Fields name parts of a call the operator's rules may match beyond
	// its top-level properties (web-fetch: host and path), or give a
	// property a kind other than text; Derive computes the added ones from
	// the validated input.
	Fields []Field
	Derive func(input json.RawMessage) (map[string]string, error)
	// Parts splits a call into pieces the operator's rules judge one by
	// one (a shell chain into its commands): a deny rule over any piece
	// denies the call, and it runs without asking only if allow rules
	// cover every piece. An error, or a Dynamic piece, leaves it to ask.
	Parts func(input json.RawMessage) ([]Part, error)
}

// toolName keeps names printable and short; providers map them further.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// NewTool builds a tool from a typed input. The schema is inferred from In
// (exported fields, json tags, a jsonschema tag as description; fields
// without omitempty are required; unknown fields are refused), and input is
// decoded strictly into In before gate and invoke see it. gate may be nil.
func NewTool[In any](name, description string,
	gate func(ctx context.Context, in In) (Requirement, error),
	invoke func(ctx context.Context, in In) (string, error),
) (*Tool, error) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		return nil, fmt.Errorf("tool %s: infer schema: %w", name, err)
	}
	t := &Tool{
		Name:        name,
		Description: description,
		Schema:      schema,
		Invoke: func(ctx context.Context, input json.RawMessage) (string, error) {
			in, err := decodeStrict[In](input)
			if err != nil {
				return "", err
			}
			return invoke(ctx, in)
		},
	}
	if gate != nil {
		t.Gate = func(ctx context.Context, input json.RawMessage) (Requirement, error) {
			in, err := decodeStrict[In](input)
			if err != nil {
				return Requirement{}, err
			}
			return gate(ctx, in)
		}
	}
	return t, nil
}

// AlwaysFor is Always for a typed tool built with NewTool.
func AlwaysFor[In any](reason string) func(context.Context, In) (Requirement, error) {
	r := Requirement{Required: true, Reason: reason}
	return func(context.Context, In) (Requirement, error) { return r, nil }
}

func decodeStrict[In any](input json.RawMessage) (In, error) {
	var in In
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("decode input: %w", err)
	}
	if dec.More() {
		return in, errors.New("decode input: trailing data after the JSON object")
	}
	return in, nil
}

// ToolDef is what the model is told about a tool.
type ToolDef struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema
}

// toolset is the tools of a service, with their schemas resolved once.
type toolset struct {
	byName map[string]*preparedTool
	defs   []ToolDef
}

type preparedTool struct {
	*Tool
	resolved *jsonschema.Resolved
}

func newToolset(tools []*Tool) (*toolset, error) {
	ts := &toolset{byName: make(map[string]*preparedTool, len(tools))}
	for _, t := range tools {
		if err := ts.add(t); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// add checks t and adds it, its schema resolved once; on an error ts is
// as it was.
func (ts *toolset) add(t *Tool) error {
	if t == nil {
		return errors.New("nil tool")
	}
	if !toolName.MatchString(t.Name) {
		return fmt.Errorf("tool %q: name must match %s", t.Name, toolName)
	}
	if _, dup := ts.byName[t.Name]; dup {
		return fmt.Errorf("tool %q: registered twice", t.Name)
	}
	if t.Invoke == nil {
		return fmt.Errorf("tool %q: no Invoke", t.Name)
	}
	schema := t.Schema
	if schema == nil {
		schema = &jsonschema.Schema{Type: "object"}
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return fmt.Errorf("tool %q: resolve schema: %w", t.Name, err)
	}
	params, err := json.Marshal(schema)
	if err != nil {
		return fmt.Errorf("tool %q: encode schema: %w", t.Name, err)
	}
	// A copy: the default gate below is this service's, not the tool's.
	tc := *t
	switch {
	case tc.Effect == "" && tc.Gate == nil:
		tc.Effect = EffectRead
	case tc.Effect == "":
		tc.Effect = EffectSend
	case tc.Effect != EffectRead && tc.Effect != EffectWrite && tc.Effect != EffectExecute && tc.Effect != EffectSend:
		return fmt.Errorf("tool %q: effect %q is not read, write, execute or send", t.Name, tc.Effect)
	}
	if tc.Gate == nil && tc.Effect != EffectRead {
		tc.Gate = Always(fmt.Sprintf("%s %ss; without a rule that allows it, every call asks.", t.Name, tc.Effect))
	}
	ts.byName[t.Name] = &preparedTool{Tool: &tc, resolved: resolved}
	ts.defs = append(ts.defs, ToolDef{Name: t.Name, Description: t.Description, Parameters: params})
	return nil
}

// validate parses the model's argument text and checks it against the
// tool's schema. Its errors are written for the model to read and correct.
func (ts *toolset) validate(call *Call) (*preparedTool, json.RawMessage, error) {
	return ts.validateInput(call.Name, call.Input())
}

func (ts *toolset) validateInput(name, args string) (*preparedTool, json.RawMessage, error) {
	call := Call{Name: name}
	t, ok := ts.byName[call.Name]
	if !ok {
		return nil, nil, fmt.Errorf("unknown tool %q", call.Name)
	}
	if len(bytes.TrimSpace([]byte(args))) == 0 {
		args = "{}"
	}
	var instance any
	if err := json.Unmarshal([]byte(args), &instance); err != nil {
		return nil, nil, fmt.Errorf("arguments for %s are not valid JSON: %v", call.Name, err)
	}
	if err := uniqueKeys(args); err != nil {
		return nil, nil, fmt.Errorf("arguments for %s: %v", call.Name, err)
	}
	if err := t.resolved.Validate(instance); err != nil {
		return nil, nil, fmt.Errorf("invalid arguments for %s: %v", call.Name, err)
	}
	return t, json.RawMessage(args), nil
}

// uniqueKeys refuses an object with two equal keys. encoding/json keeps the
// last, so the gate and the tool would see one value while the human who
// approves reads the arguments as sent and may stop at the first.
func uniqueKeys(doc string) error {
	dec := json.NewDecoder(strings.NewReader(doc))
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err // not reached: the document was parsed already
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.keys[k] {
				return fmt.Errorf("duplicate key %q", k)
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: in an object, a key comes next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
}
