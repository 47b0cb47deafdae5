package bot

import (
	"encoding/json"
	"strings"
	"testing"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
)

// TestRequestListsPartsAndMarksTheUnallowed: a chain's commands are shown
// one per line, each marked with whether a rule allows it, escaped.
func TestRequestListsPartsAndMarksTheUnallowed(t *testing.T) {
	req := prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "shell.run", Input: json.RawMessage(`{"command":"git status && rm -rf /tmp/x"}`),
		Parts: []prompt.ShownPart{{Label: "git status", Allowed: true}, {Label: "rm -rf /tmp/x"}, {Label: "$CMD </code>", Dynamic: true}}}
	v := renderApproval(req)
	text, _, err := telegramtest.ParseHTML(v.HTML)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Commands (3)", "\n✓ git status", "\n• rm -rf /tmp/x", "\n• $CMD </code> (what runs is decided only when it runs)"} {
		if !strings.Contains(text, want) {
			t.Errorf("request %q lacks %q", text, want)
		}
	}
}

// TestPreviewShownInlineOrAttachedWhole: a short diff is in the message;
// a long one is attached whole under its name, and the message says so.
func TestPreviewShownInlineOrAttachedWhole(t *testing.T) {
	short := "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"
	req := prompt.ApprovalRequest{ApprovalID: "a1", ToolName: "files.write", Input: json.RawMessage(`{"path":"docs/x"}`),
		Preview: short, PreviewName: "change.diff"}
	v := renderApproval(req)
	text, _, err := telegramtest.ParseHTML(v.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "What it does:\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new") || v.Preview != nil {
		t.Fatalf("short preview not inline: %q (attached %d bytes)", text, len(v.Preview))
	}
	long := strings.Repeat("+a line that was added to the file\n", 300)
	req.Preview = long
	v = renderApproval(req)
	text, _, err = telegramtest.ParseHTML(v.HTML)
	if err != nil {
		t.Fatal(err)
	}
	if v.Preview == nil || v.PreviewName != "a1-change.diff" || !strings.Contains(text, "attached whole as a1-change.diff") {
		t.Fatalf("long preview: name %q, text %q", v.PreviewName, text)
	}
	if string(v.Preview) != strings.TrimRight(long, "\n") {
		t.Fatal("the attached preview is not the whole change")
	}
	if v.Document != nil {
		t.Fatal("a short input was attached along with the preview")
	}
}
