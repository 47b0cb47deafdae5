package bot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"tollgate/bot/telegramtest"
	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// t0 is where every fake clock starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// realWait bounds, in real time, how long a test waits for the bot to get
// somewhere (to send, or to start waiting on the clock); it is never what
// a test waits for.
const realWait = 15 * time.Second

var someone = models.User{ID: 7, FirstName: "U"}

// paced is a Bot with default Limits on a fake clock, talking to a fake
// Bot API that records calls on the same clock, and the sends it runs in
// the background.
type paced struct {
	t   *testing.T
	b   *Bot
	srv *telegramtest.Server
	clk *telegramtest.Clock
	ctx context.Context
	wg  sync.WaitGroup
}

func newPaced(t *testing.T) *paced {
	t.Helper()
	srv := telegramtest.NewServer(t, "1:t")
	clk := telegramtest.NewClock(t0)
	srv.UseClock(clk)
	svc, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Token: "1:t", APIURL: srv.URL(), Service: svc, Store: nopStore{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &paced{t: t, b: b, srv: srv, clk: clk, ctx: ctx}
	t.Cleanup(func() {
		// Sends still waiting on the fake clock would wait forever.
		cancel()
		p.wg.Wait()
		closeCtx, done := context.WithTimeout(context.Background(), realWait)
		defer done()
		if err := svc.Close(closeCtx); err != nil {
			t.Errorf("close service: %v", err)
		}
	})
	return p
}

// sendBG sends text to chat in the background; its error, if the test has
// not ended, fails the test.
func (p *paced) sendBG(chat int64, text string) {
	p.wg.Go(func() {
		if _, err := p.b.send(p.ctx, message{chat: chat, html: text}); err != nil && p.ctx.Err() == nil {
			p.t.Errorf("send %q to %d: %v", text, chat, err)
		}
	})
}

// awaitWaiting waits until n waits are pending on the clock: the bot has
// got as far as it can without time passing.
func (p *paced) awaitWaiting(n int) {
	p.t.Helper()
	if !p.clk.AwaitPending(realWait, n) {
		p.t.Fatalf("%d waits on the clock, want %d; calls so far: %d", p.clk.Pending(), n, len(p.srv.Calls(nil)))
	}
}

// sent returns the first n sendMessage calls to chat, waiting for them.
func (p *paced) sent(chat int64, n int) []telegramtest.Call {
	p.t.Helper()
	return p.srv.WaitCalls(p.t, realWait, n, telegramtest.Method("sendMessage", func(c telegramtest.Call) bool { return c.Int("chat_id") == chat }))
}

func at(c telegramtest.Call) time.Duration { return c.Time.Sub(t0) }

func TestQuietChatGetsABurstAtOnce(t *testing.T) {
	p := newPaced(t)
	p.srv.KnownChat(7, someone)
	for i := range 3 {
		p.sendBG(7, fmt.Sprint("m", i))
	}
	for _, c := range p.sent(7, 3) {
		if at(c) != 0 || !c.OK() {
			t.Errorf("burst message sent at +%v (status %d), want at once", at(c), c.Status)
		}
	}
	if n := p.clk.Pending(); n != 0 {
		t.Errorf("%d waits pending after a burst of 3 to a quiet chat", n)
	}
	// The fourth has used up the burst: it waits the sustained second.
	p.sendBG(7, "m3")
	p.awaitWaiting(1)
	if d, _ := p.clk.Next(); d != time.Second {
		t.Errorf("fourth message waits %v, want 1s", d)
	}
	p.clk.AdvanceToNext()
	if c := p.sent(7, 4)[3]; at(c) != time.Second {
		t.Errorf("fourth message sent at +%v, want +1s", at(c))
	}
}

func TestPrivateChatBacklogSettlesAtOneASecond(t *testing.T) {
	p := newPaced(t)
	// The fake refuses what Telegram would: the bot's pace must pass it.
	p.srv.EnforceRates(telegramtest.Rates{})
	p.srv.KnownChat(7, someone)
	for i := range 20 {
		p.sendBG(7, fmt.Sprint("m", i))
	}
	p.sent(7, 3)
	p.awaitWaiting(17)
	for n := 4; n <= 20; n++ {
		if _, ok := p.clk.AdvanceToNext(); !ok {
			t.Fatalf("nothing waits for message %d", n)
		}
		p.sent(7, n)
	}
	calls := p.sent(7, 20)
	for i, c := range calls {
		want := time.Duration(max(0, i-2)) * time.Second
		if at(c) != want || !c.OK() {
			t.Errorf("message %d sent at +%v (status %d %s), want +%v", i, at(c), c.Status, c.Description, want)
		}
	}
	if n := len(p.srv.Calls(telegramtest.Method("sendMessage"))); n != 20 {
		t.Errorf("%d sendMessage calls, want 20", n)
	}
}

func TestGroupIsHeldToTwentyAMinute(t *testing.T) {
	clk := telegramtest.NewClock(t0)
	l := newLimiter(Limits{}.withDefaults(), clk)
	var delays []time.Duration
	for range 60 {
		_, d := l.reserveChat(-100)
		delays = append(delays, d)
	}
	perMinute := map[int]int{}
	for _, d := range delays {
		perMinute[int(d/time.Minute)]++
	}
	// The burst goes at once, the rest every 3s: 3 + 19 in the first
	// minute (the 20th falls on its last instant), then 20 a minute.
	if perMinute[0] != 22 || perMinute[1] != 20 {
		t.Errorf("group messages by minute: %v, want 22 (burst 3 + 19) then 20", perMinute)
	}
	if delays[3]-delays[2] != 3*time.Second || delays[40]-delays[39] != 3*time.Second {
		t.Errorf("group messages spaced %v and %v after the burst, want 3s", delays[3]-delays[2], delays[40]-delays[39])
	}
	// A private chat is not held by the group's backlog.
	if _, d := l.reserveChat(7); d != 0 {
		t.Errorf("a private chat waits %v behind a group", d)
	}
}

func TestPressIsAnsweredDespiteMessageBacklog(t *testing.T) {
	p := newPaced(t)
	// A backlog in the chat pressed in, and one over all chats: 40 chats
	// (30 go, the global burst) and 10 more messages to chat 7.
	for c := int64(1); c <= 40; c++ {
		p.srv.KnownChat(c, models.User{ID: c, FirstName: "U"})
		p.sendBG(c, "hello")
	}
	p.srv.WaitCalls(t, realWait, 30, telegramtest.Method("sendMessage"))
	p.awaitWaiting(10)
	for i := range 10 {
		p.sendBG(7, fmt.Sprint("more ", i))
	}
	p.awaitWaiting(20)
	id := p.srv.Press(7, models.User{ID: 7, FirstName: "U"}, 1, "a:x")
	// In the background, so that a press stuck behind the backlog fails
	// the test instead of hanging it: the clock never moves.
	p.wg.Go(func() { p.b.answerCallback(p.ctx, id, "Approved") })
	c := p.srv.WaitCall(t, realWait, telegramtest.Method("answerCallbackQuery"))
	if !c.OK() || at(c) != 0 {
		t.Errorf("press answered at +%v (status %d %s), want at once", at(c), c.Status, c.Description)
	}
	if n := len(p.srv.Calls(telegramtest.Method("sendMessage"))); n != 30 {
		t.Errorf("%d messages sent, want the backlog still waiting behind 30", n)
	}
	// Typing is no message either.
	ctx, cancel := context.WithTimeout(p.ctx, realWait)
	defer cancel()
	if err := p.b.lim.wait(ctx, 0, paceGlobal); err != nil {
		t.Errorf("a chat action waits for the backlog: %v", err)
	}
}

func TestChat429HoldsThatChatThenSendsOnce(t *testing.T) {
	p := newPaced(t)
	p.srv.KnownChat(7, someone)
	p.srv.Fail("sendMessage", 1, telegramtest.TooManyRequests(5))
	done := make(chan error, 1)
	p.wg.Go(func() {
		_, err := p.b.send(p.ctx, message{chat: 7, html: "held"})
		done <- err
	})
	if c := p.sent(7, 1)[0]; c.Status != 429 {
		t.Fatalf("first attempt: status %d, want the injected 429", c.Status)
	}
	p.awaitWaiting(1)
	if d, _ := p.clk.Next(); d != 5*time.Second {
		t.Errorf("retry waits %v, want retry_after 5s", d)
	}
	// Just short of retry_after nothing is due: the retry cannot go early.
	p.clk.Advance(5*time.Second - time.Millisecond)
	if n := len(p.srv.Calls(telegramtest.Method("sendMessage"))); n != 1 || p.clk.Pending() != 1 {
		t.Errorf("%d calls and %d waits at +4.999s, want the retry still waiting", n, p.clk.Pending())
	}
	p.clk.AdvanceToNext()
	if err := <-done; err != nil {
		t.Fatalf("send after 429: %v", err)
	}
	calls := p.srv.Calls(telegramtest.Method("sendMessage"))
	if len(calls) != 2 || !calls[1].OK() || at(calls[1]) != 5*time.Second {
		t.Fatalf("sendMessage calls %+v, want the 429 then one success at +5s", calls)
	}
	var mine int
	for _, m := range p.srv.Messages(7) {
		if m.From != nil && m.From.IsBot {
			mine++
		}
	}
	if mine != 1 {
		t.Errorf("%d messages from the bot in the chat, want 1", mine)
	}
}

func TestChat429DoesNotDelayAnotherChat(t *testing.T) {
	p := newPaced(t)
	p.srv.KnownChat(7, someone)
	p.srv.KnownChat(8, models.User{ID: 8, FirstName: "V"})
	p.srv.Fail("sendMessage", 1, telegramtest.TooManyRequests(30))
	p.sendBG(7, "held")
	p.sent(7, 1)
	p.awaitWaiting(1)
	p.sendBG(8, "free")
	if c := p.sent(8, 1)[0]; !c.OK() || at(c) != 0 {
		t.Errorf("other chat sent at +%v (status %d), want at once", at(c), c.Status)
	}
	// A second message to the held chat waits with it, though its burst
	// is not used up.
	p.sendBG(7, "also held")
	p.awaitWaiting(2)
	p.clk.Advance(30 * time.Second)
	for _, c := range p.sent(7, 3)[1:] {
		if !c.OK() || at(c) != 30*time.Second {
			t.Errorf("held chat's message sent at +%v (status %d), want +30s", at(c), c.Status)
		}
	}
}

func TestGlobal429HoldsEverything(t *testing.T) {
	p := newPaced(t)
	p.srv.KnownChat(8, models.User{ID: 8, FirstName: "V"})
	user := models.User{ID: 7, FirstName: "U"}
	first, second := p.srv.Press(7, user, 1, "a:x"), p.srv.Press(7, user, 1, "a:y")
	// A 429 on a call tied to no chat is flood control of the whole bot.
	p.srv.Fail("answerCallbackQuery", 1, telegramtest.TooManyRequests(3))
	p.wg.Go(func() { p.b.answerCallback(p.ctx, first, "Approved") })
	p.srv.WaitCall(t, realWait, telegramtest.Method("answerCallbackQuery"))
	p.awaitWaiting(1)
	p.sendBG(8, "waits")
	p.wg.Go(func() { p.b.answerCallback(p.ctx, second, "Rejected") })
	p.awaitWaiting(3)
	if n := len(p.srv.Calls(nil)); n != 1 {
		t.Fatalf("%d calls during the hold, want only the refused one", n)
	}
	p.clk.Advance(3 * time.Second)
	for _, c := range append(p.sent(8, 1), p.srv.WaitCalls(t, realWait, 3, telegramtest.Method("answerCallbackQuery"))[1:]...) {
		if !c.OK() || at(c) != 3*time.Second {
			t.Errorf("%s sent at +%v (status %d %s), want +3s", c.Method, at(c), c.Status, c.Description)
		}
	}
}

func TestServerErrorBackoffRunsOnTheClock(t *testing.T) {
	p := newPaced(t)
	p.srv.KnownChat(7, someone)
	p.srv.Fail("sendMessage", 2, telegramtest.ServerError())
	p.sendBG(7, "retried")
	for _, want := range []time.Duration{time.Second, 2 * time.Second} {
		p.awaitWaiting(1)
		if d, _ := p.clk.Next(); d != want {
			t.Errorf("backoff %v, want %v", d, want)
		}
		p.clk.AdvanceToNext()
	}
	if c := p.sent(7, 3)[2]; !c.OK() || at(c) != 3*time.Second {
		t.Errorf("sent at +%v (status %d), want +3s after backoffs of 1s and 2s", at(c), c.Status)
	}
}

func TestIdleChatsAreForgottenAndBusyOnesKept(t *testing.T) {
	clk := telegramtest.NewClock(t0)
	l := newLimiter(Limits{}.withDefaults(), clk)
	// Chat -1 has a backlog (1000 messages to a group: burst 3, then
	// every 3s, the next free place at +2994s) and chat -2 a 429's hold;
	// neither may be forgotten while the clock moves on 2000s.
	for range 1000 {
		l.reserveChat(-1)
	}
	l.hold(-2, time.Hour)
	for i := range int64(20000) {
		l.reserveChat(i + 1)
		if i%100 == 99 {
			clk.Advance(10 * time.Second)
		}
		if len(l.chats) > minSweep {
			t.Fatalf("%d chats kept after %d, most of them idle", len(l.chats), i+1)
		}
	}
	if _, d := l.reserveChat(-1); d != 994*time.Second {
		t.Errorf("busy group's next message waits %v, want 994s: its backlog was forgotten", d)
	}
	if d := l.heldFor(-2, paceChat); d <= 0 {
		t.Errorf("held chat forgotten: hold left %v", d)
	}
}

func TestCancelledWaitGivesItsPlaceBack(t *testing.T) {
	clk := telegramtest.NewClock(t0)
	l := newLimiter(Limits{ChatBurst: 1}.withDefaults(), clk)
	if err := l.wait(context.Background(), 7, paceChat); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- l.wait(ctx, 7, paceChat) }()
	if !clk.AwaitPending(realWait, 1) {
		t.Fatal("second message does not wait")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	// The place the cancelled message gave back is the next one's: 1s,
	// not 2s.
	if _, d := l.reserveChat(7); d != time.Second {
		t.Errorf("next message waits %v, want 1s", d)
	}
}

// The real client must turn the fake's 429 into the error do reads.
func TestFake429ReachesTheClientWithRetryAfter(t *testing.T) {
	p := newPaced(t)
	p.srv.KnownChat(7, someone)
	p.srv.Fail("sendMessage", 1, telegramtest.TooManyRequests(4))
	_, err := p.b.tg.SendMessage(p.ctx, &tgbot.SendMessageParams{ChatID: 7, Text: "x"})
	var tooMany *tgbot.TooManyRequestsError
	if !errors.As(err, &tooMany) || tooMany.RetryAfter != 4 {
		t.Errorf("client error %v, want TooManyRequestsError with RetryAfter 4", err)
	}
}

// What was measured at 1,001ms: the request, then on a press its edit and
// the answer, all to one quiet chat. Within the burst, none waits.
func TestPressEditAndAnswerGoAtOnce(t *testing.T) {
	p := newPaced(t)
	p.srv.KnownChat(7, someone)
	done := make(chan error, 1)
	p.wg.Go(func() {
		id, err := p.b.send(p.ctx, message{chat: 7, html: "run <code>ls</code>?"})
		if err == nil {
			err = p.b.edit(p.ctx, 7, id, "run <code>ls</code>? <i>approved</i>")
		}
		if err == nil {
			_, err = p.b.send(p.ctx, message{chat: 7, html: "done"})
		}
		done <- err
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(realWait):
		t.Fatalf("request, edit and answer still waiting; %d waits on the clock", p.clk.Pending())
	}
	for _, c := range p.srv.Calls(nil) {
		if !c.OK() || at(c) != 0 {
			t.Errorf("%s at +%v (status %d), want at once", c.Method, at(c), c.Status)
		}
	}
}
