package prompt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
)

// ran is one invocation as the tool saw it.
type ran struct {
	tool, input string
	info        prompt.CallInfo
}

// callLog records what every invocation of the tools it wraps saw.
type callLog struct {
	mu  sync.Mutex
	got []ran
}

func (l *callLog) wrap(tool *prompt.Tool) *prompt.Tool {
	invoke := tool.Invoke
	tool.Invoke = func(ctx context.Context, input json.RawMessage) (string, error) {
		ci, _ := prompt.CallFromContext(ctx)
		l.mu.Lock()
		l.got = append(l.got, ran{tool: tool.Name, input: string(input), info: ci})
		l.mu.Unlock()
		return invoke(ctx, input)
	}
	return tool
}

func (l *callLog) all() []ran {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ran(nil), l.got...)
}

// last returns the latest invocation, failing the test if there is none.
func (l *callLog) last(t testing.TB) ran {
	t.Helper()
	got := l.all()
	if len(got) == 0 {
		t.Fatal("no tool ran")
	}
	return got[len(got)-1]
}

type hostIn struct {
	Host string `json:"host"`
	Path string `json:"path,omitempty"`
}

// grantTools are the tools of the grant and edit tests, all logged in l:
//
//   - test.free: no gate.
//   - test.gated: always asks; "always" covers the exact input.
//   - test.nogrants: always asks and offers no "always".
//   - test.soft: a gate that never requires a human.
//   - test.host: always asks; "always" covers every call to the host.
//   - test.picky: asks, but its gate refuses the text "bad" and lets
//     texts starting "ok" run without asking.
func grantTools(t testing.TB, l *callLog) func(r *recorder) []*prompt.Tool {
	return func(r *recorder) []*prompt.Tool {
		nogrants := r.tool(t, "test.nogrants", prompt.AlwaysFor[echoIn]("adds a domain"))
		nogrants.NoGrants = true
		soft := r.tool(t, "test.soft", func(context.Context, echoIn) (prompt.Requirement, error) {
			return prompt.Requirement{Reason: "harmless"}, nil
		})
		picky := r.tool(t, "test.picky", func(_ context.Context, in echoIn) (prompt.Requirement, error) {
			switch {
			case in.Text == "bad":
				return prompt.Requirement{}, errors.New("bad is not allowed")
			case strings.HasPrefix(in.Text, "ok"):
				return prompt.Requirement{}, nil
			}
			return prompt.Requirement{Required: true, Reason: "picky"}, nil
		})
		host, err := prompt.NewTool("test.host", "fetches", prompt.AlwaysFor[hostIn]("fetches"),
			func(_ context.Context, in hostIn) (string, error) {
				r.record("test.host", in.Host+in.Path)
				return "fetched " + in.Host + in.Path, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		host.Scope = func(input json.RawMessage) (prompt.Scope, error) {
			var in hostIn
			if err := json.Unmarshal(input, &in); err != nil {
				return prompt.Scope{}, err
			}
			return prompt.Scope{Key: "host:" + in.Host, Label: "fetches from " + in.Host}, nil
		}
		return []*prompt.Tool{
			l.wrap(r.tool(t, "test.free", nil)),
			l.wrap(r.tool(t, "test.gated", prompt.AlwaysFor[echoIn]("it is risky"))),
			l.wrap(nogrants), l.wrap(soft), l.wrap(host), l.wrap(picky),
		}
	}
}

// grantedNotices returns the NoticeGranted entries of the outbox.
func grantedNotices(mem *prompttest.Store) []prompt.Notice {
	var ns []prompt.Notice
	for _, e := range mem.Outbox() {
		if e.Kind == prompt.NoticeGranted {
			ns = append(ns, e.Notice)
		}
	}
	return ns
}

// askedAgain checks that the next request is for call callID of a prompt
// in conv, and approves it so the prompt can end.
func (h *harness) askedAgain(conv, callID string) prompt.ApprovalRequest {
	h.t.Helper()
	req := h.request()
	if req.ConversationID != conv || req.ToolCallID != callID {
		h.t.Fatalf("request for %s in %s, want %s in %s", req.ToolCallID, req.ConversationID, callID, conv)
	}
	h.approve(req.ApprovalID)
	return req
}

// approveAlways waits for the next request and chooses "always" on it.
func (h *harness) approveAlways(spec prompt.GrantSpec) (prompt.ApprovalRequest, prompt.Grant) {
	h.t.Helper()
	req := h.request()
	g, err := h.svc.ApproveAlways(context.Background(), req.ApprovalID, "alice", spec)
	if err != nil {
		h.t.Fatalf("approve always: %v", err)
	}
	return req, g
}

// grantedRun checks that prompt id ended completed with call callID run
// through grant g, told in the outbox, with no request.
func (h *harness) grantedRun(id, callID string, g prompt.Grant) *prompt.Call {
	h.t.Helper()
	p := h.endAs(id, prompt.StateCompleted)
	nothingOn(h.t, h.reqs, "a granted call asked")
	c := callOf(h.t, p, callID)
	if c.Status != prompt.CallDone || c.Approval != nil || c.Grant == nil || c.Grant.ID != g.ID {
		h.t.Fatalf("granted call: %+v, approval %+v, grant %+v", c, c.Approval, c.Grant)
	}
	found := false
	for _, n := range grantedNotices(h.mem) {
		if n.PromptID == id && n.CallID == callID {
			if found || n.ConversationID != p.ConversationID || n.ApprovalID != "" {
				h.t.Fatalf("granted notices: %+v", grantedNotices(h.mem))
			}
			found = true
		}
	}
	if !found {
		h.t.Fatalf("no granted notice for %s in %+v", callID, grantedNotices(h.mem))
	}
	return c
}

func TestAlwaysInThisChatRunsTheSameCallThereWithoutAsking(t *testing.T) {
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l)},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("one"),
		prompttest.Calls(call("c2", "test.gated", "x")), prompttest.Answer("two"),
		prompttest.Calls(call("c3", "test.gated", "y")), prompttest.Answer("three"),
		prompttest.Calls(call("c4", "test.gated", "x")), prompttest.Answer("four"),
	)
	ctx := context.Background()

	first := h.create("first")
	req, g := h.approveAlways(prompt.GrantSpec{})
	exact := "input:" + prompt.InputHash(`{"text":"x"}`)
	if req.Scope == nil || req.Scope.Key != exact {
		t.Fatalf("request scope = %+v, want %s", req.Scope, exact)
	}
	if g.ID == "" || g.Tool != "test.gated" || g.Scope != exact || g.Label != req.Scope.Label ||
		g.ConversationID != "conv-1" || g.By != "alice" || g.ApprovalID != req.ApprovalID || !g.ExpiresAt.IsZero() {
		t.Fatalf("grant = %+v", g)
	}
	p := h.endAs(first, prompt.StateCompleted)
	c := callOf(t, p, "c1")
	if c.Status != prompt.CallDone || c.Grant != nil || c.Approval.Status != prompt.ApprovalApproved ||
		c.Approval.Note != prompt.GrantNote(g) || !strings.Contains(c.Approval.Note, "in this chat, until revoked") {
		t.Fatalf("call approved always: %+v, approval %+v", c, c.Approval)
	}
	if r := l.last(t); r.input != `{"text":"x"}` || !r.info.Approved || r.info.ApprovedBy != "alice" {
		t.Fatalf("the approved call ran as %+v", r)
	}
	if ns := grantedNotices(h.mem); len(ns) != 0 {
		t.Fatalf("a call a person approved is told as granted: %+v", ns)
	}

	second := h.create("second")
	h.grantedRun(second, "c2", g)
	if r := l.last(t); r.input != `{"text":"x"}` || !r.info.Approved || !strings.Contains(r.info.ApprovedBy, g.ID) ||
		r.info.CallID != "c2" {
		t.Fatalf("the granted call ran as %+v", r)
	}
	gc, err := h.svc.GrantedCall(ctx, second, "c2")
	if err != nil || gc.ConversationID != "conv-1" || gc.ToolName != "test.gated" || gc.Input != `{"text":"x"}` ||
		gc.Grant.ID != g.ID || gc.CallID != "c2" || gc.PromptID != second {
		t.Fatalf("granted call = %+v, %v", gc, err)
	}
	if _, err := h.svc.GrantedCall(ctx, first, "c1"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("granted call of a call a person approved: %v", err)
	}
	if _, err := h.svc.GrantedCall(ctx, second, "nope"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("granted call of no call: %v", err)
	}

	third := h.create("third") // another input: another scope
	h.askedAgain("conv-1", "c3")
	h.endAs(third, prompt.StateCompleted)

	fourth := h.createIn("conv-2", "fourth") // the same input in another chat
	h.askedAgain("conv-2", "c4")
	h.endAs(fourth, prompt.StateCompleted)

	if n := len(grantedNotices(h.mem)); n != 1 {
		t.Fatalf("%d granted notices, want the second prompt's only", n)
	}
	if got := len(l.all()); got != 4 {
		t.Fatalf("%d calls ran, want 4", got)
	}
}

func TestAlwaysInEveryChatCoversOtherChats(t *testing.T) {
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l)},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("one"),
		prompttest.Calls(call("c2", "test.gated", "x")), prompttest.Answer("two"),
	)
	first := h.create("first")
	_, g := h.approveAlways(prompt.GrantSpec{AllChats: true})
	if g.ConversationID != "" || !strings.Contains(prompt.GrantNote(g), "in every chat") {
		t.Fatalf("grant for every chat = %+v", g)
	}
	h.endAs(first, prompt.StateCompleted)
	second := h.createIn("conv-2", "second")
	h.grantedRun(second, "c2", g)
	gs, err := h.svc.Grants(context.Background(), "conv-2")
	if err != nil || len(gs) != 1 || gs[0].ID != g.ID {
		t.Fatalf("grants seen from another chat: %+v, %v", gs, err)
	}
}

func TestAGrantForAnHourLapses(t *testing.T) {
	clock := newManualClock()
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l), clock: clock},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("one"),
		prompttest.Calls(call("c2", "test.gated", "x")), prompttest.Answer("two"),
		prompttest.Calls(call("c3", "test.gated", "x")), prompttest.Answer("three"),
	)
	ctx := context.Background()
	start := clock.nowFunc()()
	first := h.create("first")
	_, g := h.approveAlways(prompt.GrantSpec{For: time.Hour})
	if !g.ExpiresAt.Equal(start.Add(time.Hour)) || !strings.Contains(prompt.GrantNote(g), "until 2026-11-24 10:00 UTC") {
		t.Fatalf("grant for an hour = %+v (%s)", g, prompt.GrantNote(g))
	}
	h.endAs(first, prompt.StateCompleted)

	clock.advance(59 * time.Minute)
	second := h.create("second")
	h.grantedRun(second, "c2", g)

	clock.advance(time.Minute)
	if gs, err := h.svc.Grants(ctx, "conv-1"); err != nil || len(gs) != 0 {
		t.Fatalf("grants after the hour: %+v, %v", gs, err)
	}
	third := h.create("third")
	h.askedAgain("conv-1", "c3")
	h.endAs(third, prompt.StateCompleted)
	if _, err := h.svc.ApproveAlways(ctx, g.ApprovalID, "alice", prompt.GrantSpec{For: -time.Second}); err == nil {
		t.Fatal("a negative duration was accepted")
	}
}

func TestARevokedGrantAsksAgain(t *testing.T) {
	clock := newManualClock()
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l), clock: clock},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("one"),
		prompttest.Calls(call("c2", "test.gated", "z")), prompttest.Answer("two"),
		prompttest.Calls(call("c3", "test.gated", "x")), prompttest.Answer("three"),
	)
	ctx := context.Background()
	first := h.create("first")
	_, mine := h.approveAlways(prompt.GrantSpec{})
	h.endAs(first, prompt.StateCompleted)
	second := h.createIn("conv-2", "second")
	_, theirs := h.approveAlways(prompt.GrantSpec{})
	h.endAs(second, prompt.StateCompleted)

	if _, err := h.svc.Revoke(ctx, "conv-1", "gnope", "bob"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("revoke an unknown grant: %v", err)
	}
	if _, err := h.svc.Revoke(ctx, "conv-1", theirs.ID, "bob"); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("revoke another chat's grant: %v", err)
	}
	if gs, _ := h.svc.Grants(ctx, "conv-2"); len(gs) != 1 || gs[0].ID != theirs.ID {
		t.Fatalf("another chat's grant after a refused revoke: %+v", gs)
	}
	clock.advance(time.Minute)
	g, err := h.svc.Revoke(ctx, "conv-1", mine.ID, "bob")
	if err != nil || g.ID != mine.ID || g.RevokedBy != "bob" || !g.RevokedAt.Equal(clock.nowFunc()()) {
		t.Fatalf("revoke = %+v, %v", g, err)
	}
	if _, err := h.svc.Revoke(ctx, "conv-1", mine.ID, "bob"); err == nil {
		t.Fatal("revoked twice")
	}
	if gs, _ := h.svc.Grants(ctx, "conv-1"); len(gs) != 0 {
		t.Fatalf("grants after revoking: %+v", gs)
	}
	third := h.create("third")
	h.askedAgain("conv-1", "c3")
	h.endAs(third, prompt.StateCompleted)
	if ns := grantedNotices(h.mem); len(ns) != 0 {
		t.Fatalf("granted notices: %+v", ns)
	}
}

func TestAToolThatOffersNoAlwaysRefusesIt(t *testing.T) {
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l)},
		prompttest.Calls(call("c1", "test.nogrants", "x")), prompttest.Answer("one"))
	ctx := context.Background()
	id := h.create("first")
	req := h.request()
	if req.Scope != nil {
		t.Fatalf("request of a tool without grants offers %+v", req.Scope)
	}
	if _, err := h.svc.ApproveAlways(ctx, req.ApprovalID, "alice", prompt.GrantSpec{}); !errors.Is(err, prompt.ErrNoGrant) {
		t.Fatalf("approve always = %v, want ErrNoGrant", err)
	}
	if ref, err := h.svc.LookupApproval(ctx, req.ApprovalID); err != nil || ref.Status != prompt.ApprovalPending {
		t.Fatalf("approval after a refused always: %+v, %v", ref, err)
	}
	if gs, _ := h.svc.Grants(ctx, "conv-1"); len(gs) != 0 {
		t.Fatalf("grants: %+v", gs)
	}
	if _, err := h.svc.ApproveAlways(ctx, "aaaaaaaaaaaaaaaa", "alice", prompt.GrantSpec{}); !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("approve always an unknown approval: %v", err)
	}
	h.approve(req.ApprovalID)
	h.endAs(id, prompt.StateCompleted)
	if _, err := h.svc.ApproveAlways(ctx, req.ApprovalID, "alice", prompt.GrantSpec{}); !errors.Is(err, prompt.ErrNotPending) {
		t.Fatalf("approve always a decided approval: %v", err)
	}
	if len(l.all()) != 1 {
		t.Fatalf("ran %+v", l.all())
	}
}

func TestAToolsScopeSaysWhatAlwaysCovers(t *testing.T) {
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l)},
		prompttest.Calls(prompttest.Call("c1", "test.host", `{"host":"a.example","path":"/1"}`)), prompttest.Answer("one"),
		prompttest.Calls(prompttest.Call("c2", "test.host", `{"host":"a.example","path":"/2"}`)), prompttest.Answer("two"),
		prompttest.Calls(prompttest.Call("c3", "test.host", `{"host":"b.example","path":"/1"}`)), prompttest.Answer("three"),
	)
	first := h.create("first")
	req, g := h.approveAlways(prompt.GrantSpec{})
	if req.Scope == nil || *req.Scope != (prompt.Scope{Key: "host:a.example", Label: "fetches from a.example"}) {
		t.Fatalf("scope = %+v", req.Scope)
	}
	if g.Scope != "host:a.example" || g.Label != "fetches from a.example" {
		t.Fatalf("grant = %+v", g)
	}
	h.endAs(first, prompt.StateCompleted)
	second := h.create("second") // same host, another path
	h.grantedRun(second, "c2", g)
	if r := l.last(t); r.input != `{"host":"a.example","path":"/2"}` {
		t.Fatalf("granted call ran with %s", r.input)
	}
	third := h.create("third") // another host
	h.askedAgain("conv-1", "c3")
	h.endAs(third, prompt.StateCompleted)
}

func TestWithoutAScopeAlwaysCoversTheExactInput(t *testing.T) {
	l := &callLog{}
	h := newHarness(t, opts{tools: grantTools(t, l)},
		prompttest.Calls(call("c1", "test.gated", "x")), prompttest.Answer("one"),
		// The same input, written with other white space: the same call.
		prompttest.Calls(prompttest.Call("c2", "test.gated", "{ \"text\" :\n  \"x\" }")), prompttest.Answer("two"),
		prompttest.Calls(call("c3", "test.gated", "x ")), prompttest.Answer("three"),
	)
	first := h.create("first")
	_, g := h.approveAlways(prompt.GrantSpec{})
	h.endAs(first, prompt.StateCompleted)
	second := h.create("second")
	h.grantedRun(second, "c2", g)
	third := h.create("third")
	h.askedAgain("conv-1", "c3")
	h.endAs(third, prompt.StateCompleted)
}

// findCounter counts the grant look-ups a service makes.
type findCounter struct {
	prompt.Store
	finds atomic.Int32
}

func (s *findCounter) FindGrant(ctx context.Context, conv, tool, scope string, now time.Time) (prompt.Grant, error) {
	s.finds.Add(1)
	return s.Store.FindGrant(ctx, conv, tool, scope, now)
}

func TestACallThatNeedsNoHumanNeverLooksForAGrant(t *testing.T) {
	l := &callLog{}
	counter := &findCounter{}
	h := newHarness(t, opts{tools: grantTools(t, l), wrap: func(s prompt.Store) prompt.Store {
		counter.Store = s
		return counter
	}},
		prompttest.Calls(call("c1", "test.soft", "x"), call("c2", "test.free", "x"), call("c3", "test.picky", "okay")),
		prompttest.Answer("one"),
		prompttest.Calls(call("c4", "test.gated", "x")), prompttest.Answer("two"),
	)
	first := h.create("first")
	p := h.endAs(first, prompt.StateCompleted)
	nothingOn(t, h.reqs, "a call that needs no human asked")
	for _, id := range []string{"c1", "c2", "c3"} {
		if c := callOf(t, p, id); c.Status != prompt.CallDone || c.Grant != nil || c.Approval != nil {
			t.Fatalf("call %s: %+v", id, c)
		}
	}
	for _, r := range l.all() {
		if r.info.Approved || r.info.ApprovedBy != "" {
			t.Fatalf("a call nobody approved ran as approved: %+v", r)
		}
	}
	if n := counter.finds.Load(); n != 0 {
		t.Fatalf("%d grant look-ups for calls that need no human", n)
	}
	if ns := grantedNotices(h.mem); len(ns) != 0 {
		t.Fatalf("granted notices: %+v", ns)
	}
	// A call that needs a human looks.
	second := h.create("second")
	h.askedAgain("conv-1", "c4")
	h.endAs(second, prompt.StateCompleted)
	if n := counter.finds.Load(); n != 1 {
		t.Fatalf("%d grant look-ups for a call that needs a human, want 1", n)
	}
}

func TestGrantNote(t *testing.T) {
	for _, tc := range []struct {
		g    prompt.Grant
		want string
	}{
		{prompt.Grant{Label: "fetches from a.example", ConversationID: "c"},
			"and from now on: fetches from a.example, in this chat, until revoked"},
		{prompt.Grant{Label: "fetches from a.example"},
			"and from now on: fetches from a.example, in every chat, until revoked"},
		{prompt.Grant{Label: "x", ConversationID: "c", ExpiresAt: time.Date(2026, 11, 24, 16, 4, 59, 0, time.FixedZone("CET", 3600))},
			"and from now on: x, in this chat, until 2026-11-24 15:04 UTC"},
	} {
		if got := prompt.GrantNote(tc.g); got != tc.want {
			t.Errorf("GrantNote(%+v) = %q, want %q", tc.g, got, tc.want)
		}
	}
}

// fmtRequest is for failure messages.
func fmtRequest(r prompt.ApprovalRequest) string {
	return fmt.Sprintf("%s call %s %s input %s hash %.8s edit %+v", r.ApprovalID, r.ToolCallID, r.ToolName, r.Input, r.InputHash, r.Edit)
}
