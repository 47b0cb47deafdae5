package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"tollgate/prompt"
	"tollgate/store"
)

// auditUsage is the synopsis of "bot audit".
const auditUsage = "usage: bot audit [--env-file FILE] [--json] [--since DURATION] [--limit N]"

// defaultAuditLimit is how many decisions "bot audit" prints without
// --limit.
const defaultAuditLimit = 50

// runAudit is "bot audit": it prints the latest decisions of every chat
// from DATABASE_PATH, newest first, one a line (JSON Lines with --json).
// It opens the database read-only and takes no lock, so it works while
// the bot runs. now is the clock --since counts back from.
func runAudit(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, now func() time.Time) error {
	fs := flag.NewFlagSet("bot audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error returned says what was wrong
	envFile := fs.String("env-file", "", "read settings the environment lacks from `FILE`")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	since := fs.Duration("since", 0, "only decisions of the last `DURATION` (24h, 90m)")
	limit := fs.Int("limit", defaultAuditLimit, "print at most `N` decisions")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("bot audit: %w (%s)", err, auditUsage)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("bot audit: unexpected argument %q (%s)", fs.Arg(0), auditUsage)
	case *since < 0:
		return fmt.Errorf("bot audit: --since %v is negative: give how far back to look, such as 24h (%s)", *since, auditUsage)
	case *limit <= 0:
		return fmt.Errorf("bot audit: --limit %d is not positive (%s)", *limit, auditUsage)
	}
	if *envFile != "" {
		fileEnv, err := readEnvFile(*envFile)
		if err != nil {
			return err
		}
		getenv = withFallback(getenv, fileEnv)
	}
	path, err := databasePath(getenv)
	if err != nil {
		return err
	}
	q := prompt.AuditQuery{Limit: *limit}
	if *since > 0 {
		q.Since = now().Add(-*since)
	}
	db, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		return fmt.Errorf("read the audit (DATABASE_PATH=%s): %w", path, err)
	}
	es, err := db.Audit(ctx, q)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read the audit (DATABASE_PATH=%s): %w", path, err)
	}
	if *asJSON {
		return printAuditJSON(stdout, es)
	}
	return printAuditText(stdout, es)
}

// auditJSON is an audit entry as "bot audit --json" prints it; the field
// names are part of its interface and must not change.
type auditJSON struct {
	Seq            int64  `json:"seq"`
	At             string `json:"at"`
	ConversationID string `json:"conversation_id"`
	PromptID       string `json:"prompt_id"`
	CallID         string `json:"call_id"`
	ApprovalID     string `json:"approval_id"`
	Tool           string `json:"tool"`
	InputHash      string `json:"input_hash"`
	Outcome        string `json:"outcome"`
	SourceKind     string `json:"source_kind"`
	Source         string `json:"source"`
	Feedback       string `json:"feedback"`
}

func printAuditJSON(w io.Writer, es []prompt.AuditEntry) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range es {
		err := enc.Encode(auditJSON{Seq: e.Seq, At: e.At.UTC().Format(time.RFC3339Nano), ConversationID: e.ConversationID,
			PromptID: e.PromptID, CallID: e.CallID, ApprovalID: e.ApprovalID, Tool: e.Tool, InputHash: e.InputHash,
			Outcome: string(e.Outcome), SourceKind: string(e.SourceKind), Source: e.Source, Feedback: e.Feedback})
		if err != nil {
			return fmt.Errorf("print the audit: %w", err)
		}
	}
	return nil
}

// printAuditText prints one tab-separated line an entry: time, chat,
// outcome, tool, source kind, source, the input hash's first 12
// characters, prompt/call, feedback.
func printAuditText(w io.Writer, es []prompt.AuditEntry) error {
	var errs []error
	for _, e := range es {
		hash := e.InputHash
		if len(hash) > 12 {
			hash = hash[:12]
		}
		fields := []string{e.At.UTC().Format("2006-01-02T15:04:05.000Z"), e.ConversationID, string(e.Outcome), e.Tool,
			string(e.SourceKind), e.Source, hash, e.PromptID + "/" + e.CallID, e.Feedback}
		for i, f := range fields {
			fields[i] = auditField(f)
		}
		_, err := fmt.Fprintln(w, strings.Join(fields, "\t"))
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("print the audit: %w", err)
	}
	return nil
}

// auditField keeps a value on its line and harmless to a terminal: what a
// model or a user wrote may hold tabs, newlines, escape sequences or
// characters that reorder the text, so such a value is printed quoted,
// with those escaped.
func auditField(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
