package prompt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mode says who answers when a call needs a person.
type Mode string

// The approval modes.
const (
	// ModeInteractive asks an allowed person (the default).
	ModeInteractive Mode = "interactive"
	// ModeAutoApprove runs every call that would ask: for development.
	ModeAutoApprove Mode = "auto-approve"
	// ModeAutoDeny refuses every call that would ask; nobody is asked.
	ModeAutoDeny Mode = "auto-deny"
)

// ParseMode reads an approval mode as an operator writes it; empty is
// ModeInteractive.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(s)); m {
	case "":
		return ModeInteractive, nil
	case ModeInteractive, ModeAutoApprove, ModeAutoDeny:
		return m, nil
	}
	return "", fmt.Errorf("%q is not one of interactive, auto-approve, auto-deny", s)
}

// PolicyAction is what the operator's policy says of a call.
type PolicyAction string

// The policy actions; PolicyNone leaves the call to grants and its gate.
const (
	PolicyNone  PolicyAction = ""
	PolicyDeny  PolicyAction = "deny"
	PolicyAsk   PolicyAction = "ask"
	PolicyAllow PolicyAction = "allow"
)

// Verdict is the operator's word on one call, checked before grants and
// the tool's gate.
type Verdict struct {
	Action PolicyAction
	// Source names what decided, for the audit: "rules.yaml:12".
	Source string
	// Why says it in a sentence a person reads.
	Why string
}

// Policy is the operator's rules over calls. Check sees the tool's name
// and the call's fields (see Tool.Fields); it must be safe for concurrent
// use.
type Policy interface {
	Check(tool string, fields map[string]string) Verdict
}

// FieldKind says how the operator's patterns match a field.
type FieldKind string

// The field kinds.
const (
	FieldText FieldKind = "text" // a glob over the whole value
	FieldHost FieldKind = "host" // a host name, label by label
	FieldPath FieldKind = "path" // a path, segment by segment
)

// Field is a named part of a call's input that the operator's rules match.
type Field struct {
	Name string
	Kind FieldKind
}

// Ruling is a decision made about a call without asking a person: by an
// operator's rule, by a grant, or by the approval mode.
type Ruling struct {
	Allowed bool `json:"allowed"`
	// Kind is "rule", "grant" or "mode".
	Kind string `json:"kind"`
	// By names what decided: a rule's place, a grant's ID and maker, the
	// mode.
	By  string    `json:"by"`
	Why string    `json:"why,omitempty"`
	At  time.Time `json:"at"`
}

// CallFields returns the fields of a call of t with the validated input
// that rules match: its top-level properties (strings as they are, other
// values as compact JSON) and what t.Derive adds.
func CallFields(t *Tool, input json.RawMessage) (map[string]string, error) {
	fields := map[string]string{}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(input, &props); err == nil {
		for k, v := range props {
			var s string
			if json.Unmarshal(v, &s) == nil {
				fields[k] = s
				continue
			}
			var b bytes.Buffer
			if json.Compact(&b, v) == nil {
				fields[k] = b.String()
			}
		}
	}
	if t.Derive != nil {
		derived, err := t.Derive(input)
		if err != nil {
			return nil, fmt.Errorf("fields of %s: %w", t.Name, err)
		}
		for k, v := range derived {
			fields[k] = v
		}
	}
	return fields, nil
}

// judgement is what the operator's policy, grants, the gate and the mode
// say of a call about to run.
type judgement struct {
	ask    bool // a person decides; req says why and what to show
	req    Requirement
	ruling *Ruling // decided without asking
	grant  *Grant
}

// deniedPrefix starts the result of a call the policy refused.
const deniedPrefix = "Denied by policy"

// judge decides what happens to call c of t (validated as input) before
// it runs: in the order deny, ask and allow rules, then grants (only where
// the gate would ask), then the tool's gate; and where a person would be
// asked, the mode may answer instead. An error means the call cannot be
// judged: it does not run.
func (r *run) judge(ctx context.Context, t *preparedTool, c *Call, input json.RawMessage) (judgement, error) {
	s := r.s
	gate := func() (Requirement, error) { return r.safeGate(ctx, t, input) }
	now := s.now()
	var j judgement
	v := Verdict{}
	if s.policy != nil {
		var err error
		if v, err = CheckCall(s.policy, t.Tool, input); err != nil {
			return j, err
		}
	}
	switch {
	case v.Action == PolicyDeny:
		return judgement{ruling: &Ruling{Kind: "rule", By: v.Source, Why: v.Why, At: now}}, nil
	case c.Edit != nil:
		// What a person wrote is approved on its own, whatever a rule, a
		// grant or the gate would say of it; the gate still checks it.
		req := Requirement{}
		if t.Gate != nil {
			var err error
			if req, err = gate(); err != nil {
				return j, err
			}
		}
		j.ask, j.req = true, req
		if !req.Required || req.Reason == "" {
			j.req.Reason = "The input was edited; the edited call needs its own approval."
		}
		return j, nil
	case v.Action == PolicyAsk:
		// The gate still says what to show (a diff), and may refuse.
		if t.Gate != nil {
			req, err := gate()
			if err != nil {
				return j, err
			}
			j.req = req
		}
		reason := "The operator's rules ask for approval: " + v.Why
		if j.req.Reason != "" {
			reason += ". " + j.req.Reason // what the tool says of it too
		}
		j.ask, j.req.Reason = true, reason
	case v.Action == PolicyAllow:
		return judgement{ruling: &Ruling{Allowed: true, Kind: "rule", By: v.Source, Why: v.Why, At: now}}, nil
	default:
		if t.Gate == nil {
			return j, nil
		}
		req, err := gate()
		if err != nil {
			return j, err
		}
		if !req.Required {
			return j, nil
		}
		if g := r.granted(ctx, t, c); g != nil {
			return judgement{grant: g, ruling: &Ruling{Allowed: true, Kind: "grant", By: "grant " + g.ID + " of " + g.By,
				Why: g.Label, At: now}}, nil
		}
		j.ask, j.req = true, req
	}
	switch s.mode {
	case ModeAutoApprove:
		return judgement{ruling: &Ruling{Allowed: true, Kind: "mode", By: "APPROVAL_MODE=" + string(s.mode), Why: j.req.Reason, At: now}}, nil
	case ModeAutoDeny:
		return judgement{ruling: &Ruling{Kind: "mode", By: "APPROVAL_MODE=" + string(s.mode), Why: j.req.Reason, At: now}}, nil
	}
	return j, nil
}

// CheckCall is what the operator's policy says of a call of t with the
// validated input: the rules over the whole call and, for a tool with
// parts, over each part (see partsVerdict). The service asks it before
// grants and gates; "bot rules explain" prints it.
func CheckCall(pol Policy, t *Tool, input json.RawMessage) (Verdict, error) {
	fields, err := CallFields(t, input)
	if err != nil {
		return Verdict{}, err
	}
	v := pol.Check(t.Name, fields)
	if v.Action != PolicyDeny && t.Parts != nil {
		v = partsVerdict(pol, t, input, fields, v)
	}
	return v, nil
}

// partsVerdict judges a call of a tool that splits into parts (a shell
// chain): a deny rule over any part denies the call; an ask rule over any
// asks; it is allowed only if allow rules cover every part and none is
// dynamic. A rule over the whole call may still deny or ask (whole), but
// never allow: "git *" over "git status && rm -rf /" must not pass.
func partsVerdict(pol Policy, t *Tool, input json.RawMessage, whole map[string]string, v Verdict) Verdict {
	parts, err := t.Parts(input)
	if err != nil || len(parts) == 0 {
		if v.Action == PolicyAllow {
			return Verdict{}
		}
		return v
	}
	allowed := true
	var sources []string
	for _, part := range parts {
		pv := pol.Check(t.Name, overlay(whole, part.Fields))
		switch {
		case pv.Action == PolicyDeny:
			return Verdict{Action: PolicyDeny, Source: pv.Source, Why: part.Label + ": " + pv.Why}
		case pv.Action == PolicyAsk:
			v = Verdict{Action: PolicyAsk, Source: pv.Source, Why: part.Label + ": " + pv.Why}
		case pv.Action != PolicyAllow || part.Dynamic:
			allowed = false
		default:
			sources = append(sources, pv.Source)
		}
	}
	switch {
	case v.Action == PolicyAsk:
		return v
	case allowed:
		return Verdict{Action: PolicyAllow, Source: strings.Join(slices.Compact(sources), ", "), Why: "allow rules cover every part"}
	}
	return Verdict{}
}

// overlay returns the fields of a part laid over those of the whole call.
func overlay(whole, part map[string]string) map[string]string {
	out := make(map[string]string, len(whole)+len(part))
	for k, v := range whole {
		out[k] = v
	}
	for k, v := range part {
		out[k] = v
	}
	return out
}

// ShownPart is a part of a request as the person deciding sees it: what it
// is and whether a rule allows it.
type ShownPart struct {
	Label   string
	Allowed bool
	Dynamic bool
}

// shownParts lists the parts of a call for its request, each marked with
// whether an allow rule covers it; nil if the tool has no parts.
func (s *Service) shownParts(t *preparedTool, input json.RawMessage) []ShownPart {
	if t == nil || t.Parts == nil {
		return nil
	}
	parts, err := t.Parts(input)
	if err != nil {
		return nil
	}
	whole := map[string]string{}
	if s.policy != nil {
		if whole, err = CallFields(t.Tool, input); err != nil {
			whole = map[string]string{}
		}
	}
	shown := make([]ShownPart, len(parts))
	for i, p := range parts {
		shown[i] = ShownPart{Label: p.Label, Dynamic: p.Dynamic}
		if s.policy != nil && !p.Dynamic {
			shown[i].Allowed = s.policy.Check(t.Name, overlay(whole, p.Fields)).Action == PolicyAllow
		}
	}
	return shown
}

// deniedText is the error result of a call a ruling refused.
func deniedText(rl *Ruling) string {
	if rl.Kind == "mode" {
		return deniedPrefix + " (" + rl.By + "): nobody is asked, so this call does not run"
	}
	msg := deniedPrefix + " (" + rl.By + ")"
	if rl.Why != "" {
		msg += ": " + rl.Why
	}
	return msg
}
