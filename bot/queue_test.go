package bot_test

import (
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

var carol = models.User{ID: 333, FirstName: "Carol"}

// TestAMessageThatWaitsForAWorkerSaysSo: with every worker busy, a message
// that has to wait its turn gets a note saying how many are ahead of it,
// and is answered once its turn comes.
func TestAMessageThatWaitsForAWorkerSaysSo(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := newHarness(t, []prompttest.Step{
		{Text: "answer one", Check: func(prompt.Request) error {
			close(started)
			<-release // the one worker stays on alice's prompt
			return nil
		}},
		prompttest.Answer("answer two"),
		prompttest.Answer("answer three"),
	}, func(c *config) {
		c.svc.Workers = 1
		c.AllowedUsers = append(c.AllowedUsers, carol.ID)
	})
	// Runs before the service is closed: a failed test must not leave the
	// worker blocked.
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free)
	h.start()
	h.srv.UserMessage(alice.ID, alice, "one")
	select {
	case <-started:
	case <-time.After(wait):
		t.Fatal("the model never started on the first message")
	}
	h.srv.UserMessage(bob.ID, bob, "two")
	if !h.calls.wait(wait, "create tg:222") {
		t.Fatal("bob's prompt never created")
	}
	// TODO(core): bob's prompt waits too, but Created.Ahead counts only
	// the prompts queued before it, none here, so he gets no note yet.
	third := h.srv.UserMessage(carol.ID, carol, "three")
	note := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(carol.ID), textHas("ahead of yours")))
	m, _ := note.Message()
	if m.ReplyToMessage == nil || m.ReplyToMessage.ID != third.ID {
		t.Errorf("note does not reply to the waiting message %d: %+v", third.ID, m.ReplyToMessage)
	}
	ahead := regexp.MustCompile(`(\d+) ahead of yours`).FindStringSubmatch(m.Text)
	if ahead == nil {
		t.Fatalf("note %q gives no count", m.Text)
	}
	if n, _ := strconv.Atoi(ahead[1]); n < 1 {
		t.Errorf("note %q: want at least bob's prompt ahead", m.Text)
	}
	if n := len(h.srv.Calls(telegramtest.Method("sendMessage", toChat(alice.ID)))); n != 0 {
		t.Errorf("alice, whose prompt runs, got %d messages", n)
	}

	free()
	for _, c := range []struct {
		chat int64
		text string
	}{{alice.ID, "answer one"}, {bob.ID, "answer two"}, {carol.ID, "answer three"}} {
		h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(c.chat), textHas(c.text)))
	}
}
