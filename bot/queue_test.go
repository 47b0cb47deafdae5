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
// that has to wait its turn gets a note with its place in line,
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
	for i, u := range []models.User{bob, carol} {
		sent := h.srv.UserMessage(u.ID, u, "message "+strconv.Itoa(i+2))
		note := h.srv.WaitCall(t, wait, telegramtest.Method("sendMessage", telegramtest.Succeeded, toChat(u.ID), textHas("in line")))
		m, _ := note.Message()
		if m.ReplyToMessage == nil || m.ReplyToMessage.ID != sent.ID {
			t.Errorf("note does not reply to the waiting message %d: %+v", sent.ID, m.ReplyToMessage)
		}
		place := regexp.MustCompile(`number (\d+) in line`).FindStringSubmatch(m.Text)
		if place == nil {
			t.Fatalf("note %q gives no place", m.Text)
		}
		if n, _ := strconv.Atoi(place[1]); n != i+1 {
			t.Errorf("%s's note %q: want place %d", u.FirstName, m.Text, i+1)
		}
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
