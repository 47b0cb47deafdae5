package bot_test

import (
	"strings"
	"testing"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// TestAuditShowsTheChatsDecisionsNewestFirst: /audit lists Alice's
// approval and her rejection with its note, each on one line naming her,
// the tool and the input's hash.
func TestAuditShowsTheChatsDecisionsNewestFirst(t *testing.T) {
	h := newHarness(t, []prompttest.Step{
		prompttest.Calls(prompttest.Call("c1", "shell.run", `{"cmd":"ls"}`)),
		prompttest.Calls(prompttest.Call("c2", "shell.run", `{"cmd":"curl <evil>"}`)),
		prompttest.Answer("done"),
	})
	h.start()
	h.srv.UserMessage(alice.ID, alice, "/audit")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("No decisions recorded in this chat yet.")))

	h.srv.UserMessage(alice.ID, alice, "list, then fetch")
	msg, approve, _ := h.approvalMessage(1)
	h.srv.Press(alice.ID, alice, msg.ID, approve)
	msg, _, _ = h.approvalMessage(2)
	h.srv.UserReply(alice.ID, alice, msg.ID, "use the <mirror> instead")
	h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("done")))

	h.srv.UserMessage(alice.ID, alice, "/audit")
	c := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, textHas("Last decisions")))
	m, _ := c.Message()
	lines := strings.Split(m.Text, "\n")
	if len(lines) != 3 {
		t.Fatalf("/audit shows %d lines, want a heading and 2 decisions:\n%s", len(lines), m.Text)
	}
	rejected, approved := lines[1], lines[2]
	for _, want := range []string{"❌ rejected", "shell.run", "by Alice (111)", "use the <mirror> instead",
		"input " + prompt.InputHash(`{"cmd":"curl <evil>"}`)[:12]} {
		if !strings.Contains(rejected, want) {
			t.Errorf("newest line %q lacks %q", rejected, want)
		}
	}
	for _, want := range []string{"✅ approved", "shell.run", "by Alice (111)", "input " + prompt.InputHash(`{"cmd":"ls"}`)[:12]} {
		if !strings.Contains(approved, want) {
			t.Errorf("oldest line %q lacks %q", approved, want)
		}
	}
	if html := c.Param("text"); !strings.Contains(html, "&lt;mirror&gt;") || !strings.Contains(html, "<code>shell.run</code>") {
		t.Errorf("/audit HTML is not escaped as it should be: %s", html)
	}
}
