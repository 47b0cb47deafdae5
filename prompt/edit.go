package prompt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// EditError says why an edit was refused, in words for the person who
// made it; the request stays as it was.
type EditError struct{ Reason string }

func (e *EditError) Error() string { return "edit refused: " + e.Reason }

// Edit replaces the input of the call of approval approvalID with
// arguments, a JSON object a person wrote, instead of deciding it. The
// input is checked as the model's is (the tool's schema, then its gate);
// the original request closes as edited, and the edited call asks again
// under an approval of its own, whatever its gate or a grant would say.
// The model is told, with the result, what ran and what changed.
// Returns an *EditError if the input is refused, ErrNotPending if the
// approval was decided already, ErrNotFound if there is no such approval.
func (s *Service) Edit(ctx context.Context, approvalID, arguments, by string) error {
	req, ref, err := s.Request(ctx, approvalID)
	if err != nil {
		return fmt.Errorf("edit %s: %w", approvalID, err)
	}
	if ref.Status != ApprovalPending {
		return fmt.Errorf("edit %s: it is %s: %w", approvalID, ref.Status, ErrNotPending)
	}
	tool, input, err := s.toolset().validateInput(req.ToolName, arguments)
	if err != nil {
		return &EditError{Reason: err.Error()}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, input); err != nil {
		return &EditError{Reason: err.Error()} // not reached: validated above
	}
	if InputHash(compact.String()) == InputHash(string(req.Input)) || Changes(string(req.Input), compact.String()) == "no change" {
		return &EditError{Reason: "that is the input the request shows already; nothing changed"}
	}
	if s.policy != nil {
		// A deny rule, over the call or one of its parts (a command of a
		// chain), refuses it here as judge would: accepted, the request
		// would close and the edited call be denied unasked.
		v, err := CheckCall(s.policy, tool.Tool, compact.Bytes())
		if err != nil {
			return &EditError{Reason: err.Error()}
		}
		if v.Action == PolicyDeny {
			return &EditError{Reason: "the operator's rules deny it (" + v.Source + "): " + v.Why}
		}
	}
	if tool.Gate != nil {
		r := &run{s: s}
		if _, err := r.safeGate(ctx, tool, compact.Bytes()); err != nil {
			return &EditError{Reason: "the tool refuses it: " + err.Error()}
		}
	}
	return s.decide(ctx, approvalID, Decision{Status: ApprovalEdited, By: by, At: s.now(), Note: "edited", Input: compact.String()})
}

// Changes says, in a line, how the JSON object after differs from before,
// field by field: `url: "a" → "b"; added depth: 2; removed x`. Inputs
// that are not objects are compared whole.
func Changes(before, after string) string {
	var b, a map[string]json.RawMessage
	if json.Unmarshal([]byte(before), &b) != nil || json.Unmarshal([]byte(after), &a) != nil {
		if compactJSON(before) == compactJSON(after) {
			return "no change"
		}
		return "changed whole"
	}
	keys := make([]string, 0, len(a)+len(b))
	for k := range b {
		keys = append(keys, k)
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		was, inB := b[k]
		now, inA := a[k]
		switch {
		case !inA:
			out = append(out, "removed "+k)
		case !inB:
			out = append(out, "added "+k+": "+compactJSON(string(now)))
		case compactJSON(string(was)) != compactJSON(string(now)):
			out = append(out, k+": "+compactJSON(string(was))+" → "+compactJSON(string(now)))
		}
	}
	if len(out) == 0 {
		return "no change"
	}
	return strings.Join(out, "; ")
}

func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}
