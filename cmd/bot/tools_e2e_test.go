package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tollgate/llm/llmtest"
)

// TestFileEditAsksWithTheDiffAndWritesOnApproval: end to end through the
// Bot API and the OpenAI API, an edit on a rw root asks with the unified
// diff, writes nothing before the press, and writes exactly it after.
func TestFileEditAsksWithTheDiffAndWritesOnApproval(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(target, []byte("# Notes\nold line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.extra = map[string]string{"FILES_ROOTS": "work:" + dir + ":rw"}
	args, _ := json.Marshal(map[string]string{"path": "work/notes.md", "old": "old line", "new": "new line"})
	w.llm.Add(llmtest.CallTool("files__edit", string(args)), llmtest.Text("Edited."))
	startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "fix my notes")
	req := w.tg.WaitCall(t, wait, approvalMessages)
	text := req.Param("text")
	for _, want := range []string{"files.edit", "--- a/work/notes.md", "+++ b/work/notes.md", "-old line", "+new line"} {
		if !strings.Contains(text, want) {
			t.Errorf("request lacks %q:\n%s", want, text)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "# Notes\nold line\n" {
		t.Fatalf("written before approval: %q", b)
	}
	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Approve"))
	w.tg.WaitCall(t, wait, sentText("Edited."))
	if b, _ := os.ReadFile(target); string(b) != "# Notes\nnew line\n" {
		t.Fatalf("file after approval: %q", b)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600 kept", fi.Mode().Perm())
	}
	// Reading never asks.
	w.llm.Add(llmtest.CallTool("files__read", `{"path":"work/notes.md"}`), llmtest.Text("It says new line."))
	w.tg.UserMessage(alice.ID, alice, "read it")
	w.tg.WaitCall(t, wait, sentText("It says new line."))
	if n := len(w.tg.Calls(approvalMessages)); n != 1 {
		t.Fatalf("%d requests; reading asked", n)
	}
	if result := toolResult(w.llm.Requests()[3]); !strings.Contains(result, "new line") {
		t.Fatalf("the model read %q", result)
	}
}

// TestShellChainRunsUnaskedOnlyIfRulesAllowEveryCommand: end to end, a
// chain whose every command a rule allows runs without a request; one
// with a command no rule allows asks, listing each command marked; an
// approved command sees none of the bot's secrets.
func TestShellChainRunsUnaskedOnlyIfRulesAllowEveryCommand(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("allow:\n  - tool: shell.run\n    command: \"echo *\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.extra = map[string]string{"SHELL_ENABLED": "true", "SHELL_DIR": dir, "APPROVAL_RULES": rules, "LLM_API_KEY": "sk-secret-key"}
	run := func(cmd string) string {
		b, _ := json.Marshal(map[string]string{"command": cmd})
		return string(b)
	}
	w.llm.Add(llmtest.CallTool("shell__run", run("echo hi && echo there")), llmtest.Text("Said hi."))
	startBot(t, w.env())

	w.tg.UserMessage(alice.ID, alice, "say hi")
	w.tg.WaitCall(t, wait, sentText("Said hi."))
	if n := len(w.tg.Calls(approvalMessages)); n != 0 {
		t.Fatalf("%d requests for a chain the rules allow", n)
	}
	if result := toolResult(w.llm.Requests()[1]); !strings.Contains(result, "hi\nthere") {
		t.Fatalf("the model read %q", result)
	}

	w.llm.Add(llmtest.CallTool("shell__run", run("echo start && env")), llmtest.Text("Listed."))
	w.tg.UserMessage(alice.ID, alice, "show the environment")
	req := w.tg.WaitCall(t, wait, approvalMessages)
	text := req.Param("text")
	for _, want := range []string{"Commands (2)", "✓ <code>echo start</code>", "• <code>env</code>"} {
		if !strings.Contains(text, want) {
			t.Errorf("request lacks %q:\n%s", want, text)
		}
	}
	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Approve"))
	w.tg.WaitCall(t, wait, sentText("Listed."))
	result := toolResult(w.llm.Requests()[3])
	if !strings.Contains(result, "PATH=") {
		t.Fatalf("env did not run: %q", result)
	}
	for _, secret := range []string{token, "sk-secret-key", "TELEGRAM_BOT_TOKEN", "LLM_API_KEY"} {
		if strings.Contains(result, secret) {
			t.Errorf("the command saw %q:\n%s", secret, result)
		}
	}
}
