package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"tollgate/bot/telegramtest"
	"tollgate/llm/llmtest"
	"tollgate/prompt"
	"tollgate/store/pgtest"
)

// The replica tests run three bot processes in webhook mode on one
// PostgreSQL database, behind a load balancer that hands each of the fake
// Bot API's deliveries to a replica chosen at random, as a reverse proxy
// with no affinity would.

const webhookSecret = "replica-secret_1"

// balancer forwards each request to one of its backends at random. A
// backend that is down answers 502 through it, and the fake Bot API
// delivers the update again, likely to another.
type balancer struct {
	srv      *httptest.Server
	backends []*httputil.ReverseProxy

	mu sync.Mutex
	// captured, when not nil, takes the deliveries instead of the
	// replicas: the test hands them on itself.
	captured chan []byte
}

func newBalancer(t *testing.T, addrs []string) *balancer {
	lb := &balancer{}
	for _, a := range addrs {
		u, err := url.Parse("http://" + a)
		if err != nil {
			t.Fatal(err)
		}
		p := httputil.NewSingleHostReverseProxy(u)
		// A killed replica is expected: answer 502 without a log line.
		p.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
		lb.backends = append(lb.backends, p)
	}
	lb.srv = httptest.NewServer(lb)
	t.Cleanup(lb.srv.Close)
	return lb
}

func (lb *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lb.mu.Lock()
	captured := lb.captured
	lb.mu.Unlock()
	if captured != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		captured <- body
		return
	}
	lb.backends[rand.IntN(len(lb.backends))].ServeHTTP(w, r)
}

// capture makes the balancer keep the next deliveries for the test, and
// returns the channel they arrive on; release ends it.
func (lb *balancer) capture() chan []byte {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.captured = make(chan []byte, 16)
	return lb.captured
}

func (lb *balancer) release() {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.captured = nil
}

// replica is one bot process of a cluster.
type replica struct {
	name string
	addr string
	proc *proc
	env  map[string]string
}

type cluster struct {
	t        *testing.T
	w        *world
	lb       *balancer
	replicas []*replica
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newCluster starts n replicas of the bot on one new PostgreSQL database,
// behind a random load balancer set as the webhook, and waits until each
// answers its health check.
func newCluster(t *testing.T, w *world, n int) *cluster {
	t.Helper()
	dbURL := pgtest.URL(t)
	c := &cluster{t: t, w: w}
	var addrs []string
	for i := range n {
		r := &replica{name: fmt.Sprint("r", i+1), addr: freeAddr(t)}
		addrs = append(addrs, r.addr)
		c.replicas = append(c.replicas, r)
	}
	c.lb = newBalancer(t, addrs)
	for _, r := range c.replicas {
		env := w.env()
		delete(env, "DATABASE_PATH")
		env["DATABASE_URL"] = dbURL
		env["WEBHOOK_URL"] = c.lb.srv.URL + "/telegram"
		env["WEBHOOK_SECRET"] = webhookSecret
		env["LISTEN_ADDR"] = r.addr
		env["REPLICA_NAME"] = r.name
		env["REPLICA_LEASE_TTL"] = leaseTTL.String()
		r.env = env
		r.proc = startBot(t, env)
	}
	for _, r := range c.replicas {
		c.awaitHealthy(r)
	}
	return c
}

// health reads replica r's /healthz answer.
func (c *cluster) health(r *replica) (health, error) {
	resp, err := http.Get("http://" + r.addr + "/healthz")
	if err != nil {
		return health{}, err
	}
	defer resp.Body.Close()
	var h health
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("health of %s is not JSON: %v: %q", r.name, err, body)
	}
	return h, nil
}

func (c *cluster) awaitHealthy(r *replica) {
	c.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		resp, err := http.Get("http://" + r.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("replica %s not healthy: %v", r.name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sender waits until exactly one live replica says it is the sender, and
// returns it.
func (c *cluster) sender(timeout time.Duration) *replica {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var senders []*replica
		for _, r := range c.replicas {
			if r.dead() {
				continue
			}
			if h, err := c.health(r); err == nil && h.Sender {
				senders = append(senders, r)
			}
		}
		if len(senders) == 1 {
			return senders[0]
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d senders after %s", len(senders), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *replica) dead() bool {
	select {
	case <-r.proc.done:
		return true
	default:
		return false
	}
}

// post hands an update to replica r directly, as the balancer would.
func (c *cluster) post(r *replica, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+r.addr+"/telegram", strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", webhookSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// once fails t unless exactly one call matches.
func once(t *testing.T, tg *telegramtest.Server, what string, match func(telegramtest.Call) bool) {
	t.Helper()
	if calls := tg.Calls(match); len(calls) != 1 {
		t.Errorf("%s %d times, want once", what, len(calls))
		for _, c := range calls {
			t.Logf("  %s %s", c.Method, c.Param("text"))
		}
	}
}

// leaseTTL is the replicas' REPLICA_LEASE_TTL: short, so that a death is
// taken over within seconds.
const leaseTTL = 3 * time.Second

// replicaWait bounds what a replica must see done by another. The sender
// is woken at once by the notices its own process writes, and with leases
// reads the outbox every third of the lease for the others'.
const replicaWait = 20 * time.Second

// settle waits for stray work to show: a duplicate send or a second fetch
// would come within this.
const settle = 2 * time.Second

func TestReplicasPressAtAnyReplicaDecidesAndRunsOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.llm.Add(llmtest.CallTool("web-fetch__fetch", w.fetchArgs()), llmtest.Text("Three replicas say hello."))
	newCluster(t, w, 3)
	w.tg.WaitCall(t, replicaWait, telegramtest.Method("setWebhook", telegramtest.Succeeded))

	w.tg.UserMessage(alice.ID, alice, "What does the news page say?")
	req := w.tg.WaitCall(t, replicaWait, approvalMessages)
	if w.hits.Load() != 0 {
		t.Fatal("page fetched before approval")
	}
	// Through the balancer: two in three presses reach a replica other
	// than the one that took the message.
	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Approve"))
	w.tg.WaitCall(t, replicaWait, sentText("Three replicas say hello."))
	w.tg.WaitCall(t, replicaWait, func(c telegramtest.Call) bool {
		return c.Method == "editMessageText" && c.OK() && strings.Contains(c.Param("text"), "Approved")
	})
	time.Sleep(settle)
	if got := w.hits.Load(); got != 1 {
		t.Errorf("page fetched %d times", got)
	}
	once(t, w.tg, "request sent", approvalMessages)
	once(t, w.tg, "answer sent", sentText("Three replicas say hello."))
	if n := len(w.llm.Requests()); n != 2 {
		t.Errorf("model asked %d times, want 2", n)
	}
}

func TestReplicasDoublePressOnTwoReplicasDecidesOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.llm.Add(llmtest.CallTool("web-fetch__fetch", w.fetchArgs()), llmtest.Text("Decided once."))
	c := newCluster(t, w, 3)
	w.tg.WaitCall(t, replicaWait, telegramtest.Method("setWebhook", telegramtest.Succeeded))

	w.tg.UserMessage(alice.ID, alice, "What does the news page say?")
	req := w.tg.WaitCall(t, replicaWait, approvalMessages)

	// Two presses of Approve, taken from the balancer and handed to two
	// replicas at the same moment.
	presses := c.lb.capture()
	data := buttonData(t, req, "Approve")
	ids := []string{
		w.tg.Press(alice.ID, alice, messageID(t, req), data),
		w.tg.Press(alice.ID, alice, messageID(t, req), data),
	}
	var bodies [][]byte
	for range 2 {
		select {
		case b := <-presses:
			bodies = append(bodies, b)
		case <-time.After(replicaWait):
			t.Fatal("the presses were not delivered")
		}
	}
	c.lb.release()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			<-start
			if status, err := c.post(c.replicas[i], body); err != nil || status != http.StatusOK {
				t.Errorf("press at %s: status %d, %v", c.replicas[i].name, status, err)
			}
		})
	}
	close(start)
	wg.Wait()

	w.tg.WaitCall(t, replicaWait, sentText("Decided once."))
	answers := w.tg.WaitCalls(t, replicaWait, 2, telegramtest.Method("answerCallbackQuery"))
	time.Sleep(settle)
	texts := map[string]string{}
	for _, a := range w.tg.Calls(telegramtest.Method("answerCallbackQuery")) {
		texts[a.Param("callback_query_id")] = a.Param("text")
	}
	if len(texts) != 2 || len(answers) < 2 {
		t.Fatalf("presses answered: %v", texts)
	}
	var approved, already int
	for _, id := range ids {
		switch {
		case strings.HasPrefix(texts[id], "Approved"):
			approved++
		case texts[id] == "Already decided":
			already++
		}
	}
	if approved != 1 || already != 1 {
		t.Errorf("press answers %v: want one Approved and one Already decided", texts)
	}
	if got := w.hits.Load(); got != 1 {
		t.Errorf("page fetched %d times", got)
	}
	once(t, w.tg, "answer sent", sentText("Decided once."))
}

// awaitNewSender waits until exactly one live replica says it is the
// sender and it is not old, and returns it.
func (c *cluster) awaitNewSender(old *replica, timeout time.Duration) *replica {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := c.sender(time.Until(deadline))
		if s != old {
			return s
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s is still the sender after %s", old.name, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The sender's lease lasts REPLICA_LEASE_TTL; the others try every third
// of it.
const senderTTL = leaseTTL

// claimTTL is how long a sender's claim on an outbox entry lasts (bot's
// claimLeases lease terms): an entry whose sender died mid-delivery goes
// out again once it lapses.
const claimTTL = 4 * senderTTL

func TestReplicasSIGKILLOfTheSenderLosesNoNoticeAndSendsNoneTwice(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.llm.Add(llmtest.CallTool("web-fetch__fetch", w.fetchArgs()), llmtest.Text("The new sender says hello."))
	c := newCluster(t, w, 3)
	old := c.sender(wait)

	// The request's first send fails, and the sender dies before its
	// retry, a second later: it dies mid-delivery, holding the entry's
	// claim.
	w.tg.Fail("sendMessage", 1, telegramtest.ServerError())
	w.tg.UserMessage(alice.ID, alice, "What does the news page say?")
	w.tg.WaitCall(t, replicaWait, func(c telegramtest.Call) bool {
		return c.Method == "sendMessage" && !c.OK() && strings.Contains(c.Param("reply_markup"), "inline_keyboard")
	})
	old.proc.kill()
	killed := time.Now()
	if n := len(w.tg.Calls(approvalMessages)); n != 0 {
		t.Fatalf("the request got through before the kill (%d); the test proves nothing", n)
	}

	next := c.awaitNewSender(old, senderTTL+replicaWait)
	tookOver := time.Since(killed)
	t.Logf("sender %s killed; %s took over %s later (lease %s)", old.name, next.name, tookOver.Round(time.Millisecond), senderTTL)
	if tookOver > senderTTL+senderTTL/3+5*time.Second {
		t.Errorf("%s took over %s after the sender died; its lease lasts %s", next.name, tookOver, senderTTL)
	}
	// The new sender leaves the entry to the dead one's claim until it
	// lapses (claimLeases lease terms), then sends it.
	req := w.tg.WaitCall(t, claimTTL+replicaWait, approvalMessages)
	t.Logf("the request held by the dead sender's claim was sent %s after the kill (claim %s)", time.Since(killed).Round(time.Millisecond), claimTTL)

	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Approve"))
	w.tg.WaitCall(t, replicaWait, sentText("The new sender says hello."))
	time.Sleep(settle)
	once(t, w.tg, "request sent", approvalMessages)
	once(t, w.tg, "answer sent", sentText("The new sender says hello."))
	if got := w.hits.Load(); got != 1 {
		t.Errorf("page fetched %d times", got)
	}
}

// promptTTL is the prompt lease's TTL (REPLICA_LEASE_TTL): a live replica
// renews it every third; the others look for lapsed ones every TTL, so a
// takeover comes within two TTLs of a death.
const promptTTL = leaseTTL

func TestReplicasSIGKILLWhileAToolRunsIsReportedAsOutcomeUnknownAndNotRunAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// The page answers only when the test lets it, or never: the replica
	// fetching it dies first.
	fetching := make(chan struct{}, 4)
	w.page = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		fetching <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(w.page.Close)
	w.llm.Add(llmtest.CallTool("web-fetch__fetch", w.fetchArgs()), llmtest.Text("I cannot tell whether it ran."))
	c := newCluster(t, w, 3)

	w.tg.UserMessage(alice.ID, alice, "What does the news page say?")
	req := w.tg.WaitCall(t, replicaWait, approvalMessages)
	// The press goes to r2 itself: the replica that decides advances the
	// prompt, so r2 runs the fetch.
	presses := c.lb.capture()
	w.tg.Press(alice.ID, alice, messageID(t, req), buttonData(t, req, "Approve"))
	var press []byte
	select {
	case press = <-presses:
	case <-time.After(replicaWait):
		t.Fatal("the press was not delivered")
	}
	c.lb.release()
	runner := c.replicas[1]
	if status, err := c.post(runner, press); err != nil || status != http.StatusOK {
		t.Fatalf("press at %s: status %d, %v", runner.name, status, err)
	}
	select {
	case <-fetching:
	case <-time.After(replicaWait):
		t.Fatal("the page was not fetched")
	}
	runner.proc.kill()
	killed := time.Now()

	// Another replica takes the prompt over and tells the model the
	// call's outcome is unknown.
	ctx, cancel := context.WithTimeout(context.Background(), 2*promptTTL+replicaWait)
	defer cancel()
	second, err := w.llm.WaitContext(ctx, 2)
	if err != nil {
		t.Fatalf("no takeover %s after the kill: %v", time.Since(killed).Round(time.Millisecond), err)
	}
	took := time.Since(killed)
	t.Logf("%s killed while fetching; the prompt was taken over %s later (lease %s)", runner.name, took.Round(time.Millisecond), promptTTL)
	if took > 2*promptTTL+5*time.Second {
		t.Errorf("taken over %s after the death; the lease lasts %s", took, promptTTL)
	}
	if result := toolResult(second); !strings.Contains(result, prompt.InterruptedError) {
		t.Errorf("the model was told %q, not that the outcome is unknown", result)
	}
	w.tg.WaitCall(t, replicaWait, sentText("I cannot tell whether it ran."))
	time.Sleep(settle)
	if got := w.hits.Load(); got != 1 {
		t.Errorf("page fetched %d times", got)
	}
	once(t, w.tg, "answer sent", sentText("I cannot tell whether it ran."))
	if n := len(w.llm.Requests()); n != 2 {
		t.Errorf("model asked %d times, want 2", n)
	}
}
