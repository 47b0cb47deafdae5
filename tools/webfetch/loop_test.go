package webfetch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
	"tollgate/tools/webfetch"
)

// loopResolver points every name at loopback, where the test server is.
type loopResolver struct{}

func (loopResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// harness runs the web-fetch tools through the real approval loop.
type harness struct {
	t     *testing.T
	svc   *prompt.Service
	model *prompttest.Model
	store *webfetch.MemStore
	// prompts is the core's store: tests read what was saved from it.
	prompts *prompttest.Store
	port    string
	hits    atomic.Int32
	// settled gets a prompt's ID each time it pauses or ends.
	settled chan string

	mu        sync.Mutex
	approvals []prompt.ApprovalRequest
}

// completion is a prompt the harness created, read back from the store.
type completion struct {
	h  *harness
	id string
}

func (c *completion) ID() string { return c.id }

func (c *completion) Prompt() *prompt.Prompt {
	c.h.t.Helper()
	p, err := c.h.prompts.Prompt(c.id)
	if err != nil {
		c.h.t.Fatal(err)
	}
	return p
}

func newHarness(t *testing.T, seed []string, steps ...prompttest.Step) *harness {
	t.Helper()
	h := &harness{t: t, model: prompttest.NewModel(steps...), store: webfetch.NewMemStore(),
		prompts: prompttest.NewStore(), settled: make(chan string, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "content of %s%s", r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	h.port = u.Port()
	f, err := webfetch.New(context.Background(), webfetch.Config{
		Store: h.store, Seed: seed, AllowPrivate: true, Resolver: loopResolver{},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.svc, err = prompt.NewService(prompt.Config{Model: h.model, Store: h.prompts, Tools: f.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	h.svc.OnApprovalRequested(func(_ context.Context, req prompt.ApprovalRequest) {
		h.mu.Lock()
		h.approvals = append(h.approvals, req)
		h.mu.Unlock()
		h.settled <- req.PromptID
	})
	h.svc.OnEnded(func(_ context.Context, a prompt.Answer) { h.settled <- a.PromptID })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.svc.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return h
}

func (h *harness) url(host, path string) string { return "http://" + host + ":" + h.port + path }

func (h *harness) run(input string) *completion {
	h.t.Helper()
	created, err := h.svc.Create(context.Background(), "chat-1", input)
	if err != nil {
		h.t.Fatal(err)
	}
	c := &completion{h: h, id: created.PromptID}
	h.wait(c)
	return c
}

// wait waits for c to pause or end once more.
func (h *harness) wait(c *completion) {
	h.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case id := <-h.settled:
			if id == c.id {
				return
			}
		case <-timeout:
			h.t.Fatalf("prompt %s neither paused nor ended", c.id)
		}
	}
}

func (h *harness) lastApproval() prompt.ApprovalRequest {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.approvals) == 0 {
		h.t.Fatal("no approval was requested")
	}
	return h.approvals[len(h.approvals)-1]
}

func (h *harness) approvalCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.approvals)
}

func fetchCall(id, u string) prompt.ToolCall {
	return prompttest.Call(id, webfetch.ToolFetch, fmt.Sprintf(`{"url":%q}`, u))
}

func domainCall(id, tool, domain string) prompt.ToolCall {
	return prompttest.Call(id, tool, fmt.Sprintf(`{"domain":%q}`, domain))
}

func result(t *testing.T, c *completion, id string) *prompt.Result {
	t.Helper()
	p := c.Prompt()
	for _, it := range p.Output {
		if it.Call != nil && it.Call.ID == id {
			if it.Call.Result == nil {
				t.Fatalf("call %s has no result (status %s)", id, it.Call.Status)
			}
			return it.Call.Result
		}
	}
	t.Fatalf("no call %s in prompt (state %s, error %q)", id, p.State, p.Error)
	return nil
}

func wantState(t *testing.T, c *completion, want prompt.State) {
	t.Helper()
	if p := c.Prompt(); p.State != want {
		t.Fatalf("state %s (error %q); want %s", p.State, p.Error, want)
	}
}

func TestListedFetchRunsWithoutApproval(t *testing.T) {
	h := newHarness(t, []string{"example.com"})
	h.model.Add(prompttest.Calls(fetchCall("c1", h.url("example.com", "/a"))), prompttest.Answer("read it"))
	c := h.run("read example.com")
	wantState(t, c, prompt.StateCompleted)
	if r := result(t, c, "c1"); r.Type != prompt.ResultSuccess || !strings.Contains(r.Output, "content of example.com:"+h.port+"/a") {
		t.Fatalf("result %+v", r)
	}
	if h.approvalCount() != 0 || h.hits.Load() != 1 {
		t.Fatalf("approvals %d, hits %d; want 0, 1", h.approvalCount(), h.hits.Load())
	}
}

func TestUnlistedFetchPausesThenRunsOnceAfterApproval(t *testing.T) {
	h := newHarness(t, []string{"example.com"})
	target := h.url("unlisted.example.org", "/page")
	h.model.Add(prompttest.Calls(fetchCall("c1", target)), prompttest.Answer("done"))
	c := h.run("read it")
	wantState(t, c, prompt.StateWaiting)
	req := h.lastApproval()
	if want := `Domain "unlisted.example.org" is not on the allowlist. Approval required to fetch.`; req.Reason != want {
		t.Fatalf("reason %q; want %q", req.Reason, want)
	}
	if h.hits.Load() != 0 {
		t.Fatal("fetched before approval")
	}
	if err := h.svc.Approve(context.Background(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateCompleted)
	if r := result(t, c, "c1"); r.Type != prompt.ResultSuccess || !strings.Contains(r.Output, "content of unlisted.example.org") {
		t.Fatalf("result %+v", r)
	}
	if err := h.svc.Approve(context.Background(), req.ApprovalID, "alice"); !errors.Is(err, prompt.ErrNotPending) && !errors.Is(err, prompt.ErrNotFound) {
		t.Fatalf("second approve: %v", err)
	}
	if h.hits.Load() != 1 {
		t.Fatalf("hits %d; want exactly 1", h.hits.Load())
	}

	// The approval granted nothing for later calls.
	h.model.Add(prompttest.Calls(fetchCall("c2", target)), prompttest.Answer("again"))
	c2 := h.run("read it again")
	wantState(t, c2, prompt.StateWaiting)
	if h.hits.Load() != 1 || h.approvalCount() != 2 {
		t.Fatalf("hits %d approvals %d; the second call must ask again", h.hits.Load(), h.approvalCount())
	}
}

func TestUnlistedFetchNeverRunsAfterRejection(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Add(prompttest.Calls(fetchCall("c1", h.url("unlisted.example.org", "/"))), prompttest.Answer("ok"))
	c := h.run("read it")
	req := h.lastApproval()
	if err := h.svc.Reject(context.Background(), req.ApprovalID, "no", "bob"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateCompleted)
	if r := result(t, c, "c1"); r.Type != prompt.ResultError || !strings.HasPrefix(r.Error, prompt.RejectedPrefix) {
		t.Fatalf("result %+v", r)
	}
	if h.hits.Load() != 0 {
		t.Fatalf("rejected fetch reached the server %d times", h.hits.Load())
	}
}

func TestAddDomainThenFetchWithoutApproval(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Add(
		prompttest.Calls(domainCall("c1", webfetch.ToolAddDomain, "Docs.Example.org.")),
		prompttest.Calls(fetchCall("c2", h.url("docs.example.org", "/guide"))),
		prompttest.Answer("done"),
	)
	c := h.run("add docs and read")
	wantState(t, c, prompt.StateWaiting)
	req := h.lastApproval()
	if req.Reason != webfetch.AddDomainReason("docs.example.org") || req.ToolName != webfetch.ToolAddDomain {
		t.Fatalf("request %+v", req)
	}
	if _, listed := h.store.AddedBy("docs.example.org"); listed {
		t.Fatal("added before approval")
	}
	if err := h.svc.Approve(context.Background(), req.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateCompleted)
	if r := result(t, c, "c1"); r.Output != "Added docs.example.org to the allowlist." {
		t.Fatalf("add result %+v", r)
	}
	if by, ok := h.store.AddedBy("docs.example.org"); !ok || by != "alice" {
		t.Fatalf("added by %q, %v", by, ok)
	}
	if r := result(t, c, "c2"); r.Type != prompt.ResultSuccess || h.approvalCount() != 1 {
		t.Fatalf("fetch result %+v after %d approvals", r, h.approvalCount())
	}
}

func TestAddDomainInvalidAsksNobody(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Add(
		prompttest.Calls(
			domainCall("c1", webfetch.ToolAddDomain, "co.uk"),
			domainCall("c2", webfetch.ToolAddDomain, "127.0.0.1"),
			domainCall("c3", webfetch.ToolAddDomain, "localhost"),
		),
		prompttest.Answer("cannot"),
	)
	c := h.run("add these")
	wantState(t, c, prompt.StateCompleted)
	for id, want := range map[string]string{"c1": "public suffix", "c2": "IP address", "c3": "special-use"} {
		if r := result(t, c, id); r.Type != prompt.ResultError || !strings.Contains(r.Error, want) {
			t.Errorf("%s: result %+v; want error containing %q", id, r, want)
		}
	}
	if h.approvalCount() != 0 {
		t.Fatalf("%d approvals asked for invalid domains", h.approvalCount())
	}
	if d, _ := h.store.Domains(context.Background()); len(d) != 0 {
		t.Fatalf("allowlist changed: %v", d)
	}
}

// TestAddDomainAlreadyListedAsksNobody: nothing would change, so no human
// is asked, and an operator entry is not copied into the store (where it
// would outlive its removal from the operator's list).
func TestAddDomainAlreadyListedAsksNobody(t *testing.T) {
	h := newHarness(t, []string{"example.com"})
	h.model.Add(prompttest.Calls(domainCall("c1", webfetch.ToolAddDomain, "EXAMPLE.com")), prompttest.Answer("ok"))
	c := h.run("add")
	wantState(t, c, prompt.StateCompleted)
	if r := result(t, c, "c1"); r.Type != prompt.ResultSuccess || r.Output != "example.com is already on the operator's list; nothing changed." {
		t.Fatalf("result %+v", r)
	}
	if h.approvalCount() != 0 {
		t.Fatalf("%d approvals asked", h.approvalCount())
	}
	if by, listed := h.store.AddedBy("example.com"); listed {
		t.Fatalf("operator entry written to the store (added by %q)", by)
	}
}

// TestListAndRemoveDomainsNeedNoApproval: list-domains says where each
// entry came from; remove-domain takes away what humans added, never an
// entry of the operator's list.
func TestListAndRemoveDomainsNeedNoApproval(t *testing.T) {
	h := newHarness(t, []string{"example.com", "*.docs.example.org", "localhost", "nas.local:5000"})
	ctx := context.Background()
	h.store.AddDomain(ctx, "golang.org", "Alice (111)")
	h.store.AddDomain(ctx, "xn--bcher-kva.example", "Bob (222)")
	h.model.Add(
		prompttest.Calls(
			prompttest.Call("c1", webfetch.ToolListDomains, `{}`),
			domainCall("c2", webfetch.ToolRemoveDomain, "Example.COM"),
			domainCall("c3", webfetch.ToolRemoveDomain, "never-listed.example.com"),
			domainCall("c4", webfetch.ToolRemoveDomain, "https://x/"),
			domainCall("c5", webfetch.ToolRemoveDomain, "Golang.org."),
			domainCall("c6", webfetch.ToolRemoveDomain, "nas.local:5000"),
			prompttest.Call("c7", webfetch.ToolListDomains, ``),
			fetchCall("c8", h.url("golang.org", "/")),
			fetchCall("c9", h.url("example.com", "/")),
		),
		prompttest.Answer("ok"),
	)
	c := h.run("tidy up")
	wantState(t, c, prompt.StateWaiting) // only c8: golang.org is no longer listed
	const header = "Allowed domains (operator: from the bot's configuration, only the operator can remove them):\n"
	if r := result(t, c, "c1"); r.Output != header+"*.docs.example.org (operator)\nexample.com (operator)\n"+
		"golang.org (added by Alice (111))\nlocalhost (operator)\nnas.local (port 5000 only; operator)\n"+
		"xn--bcher-kva.example (bücher.example; added by Bob (222))" {
		t.Fatalf("list %+v", r)
	}
	if r := result(t, c, "c2"); r.Type != prompt.ResultError ||
		r.Error != "example.com is on the operator's list (WEBFETCH_ALLOWED_DOMAINS); only the operator can remove it" {
		t.Fatalf("remove operator entry %+v", r)
	}
	if r := result(t, c, "c3"); r.Output != "never-listed.example.com was not on the allowlist; nothing changed." {
		t.Fatalf("remove unlisted %+v", r)
	}
	if r := result(t, c, "c4"); r.Type != prompt.ResultError || !strings.Contains(r.Error, "is a URL") {
		t.Fatalf("remove URL %+v", r)
	}
	if r := result(t, c, "c5"); r.Output != "Removed golang.org from the allowlist." {
		t.Fatalf("remove %+v", r)
	}
	if r := result(t, c, "c6"); r.Type != prompt.ResultError || !strings.Contains(r.Error, "nas.local is on the operator's list") {
		t.Fatalf("remove operator entry with a port %+v", r)
	}
	if r := result(t, c, "c7"); r.Output != header+"*.docs.example.org (operator)\nexample.com (operator)\n"+
		"localhost (operator)\nnas.local (port 5000 only; operator)\nxn--bcher-kva.example (bücher.example; added by Bob (222))" {
		t.Fatalf("list after remove %+v", r)
	}
	if req := h.lastApproval(); req.ToolCallID != "c8" || h.approvalCount() != 1 {
		t.Fatalf("approvals %d, last %+v", h.approvalCount(), req)
	}
}

func TestFetchGateRefusalIsAnErrorResultWithoutApproval(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Add(prompttest.Calls(fetchCall("c1", "file:///etc/passwd")), prompttest.Answer("no"))
	c := h.run("read")
	wantState(t, c, prompt.StateCompleted)
	if r := result(t, c, "c1"); r.Type != prompt.ResultError || !strings.Contains(r.Error, "only http and https") {
		t.Fatalf("result %+v", r)
	}
	if h.approvalCount() != 0 {
		t.Fatal("a human was asked about a file URL")
	}
}

// TestOperatorListIsAuthoritative: the operator's list is never written
// to the store, so an entry taken off it is gone at the next start, while
// what a human added stays.
func TestOperatorListIsAuthoritative(t *testing.T) {
	ctx := context.Background()
	st := webfetch.NewMemStore()
	st.AddDomain(ctx, "golang.org", "Alice (111)")
	var logs bytes.Buffer
	cfg := webfetch.Config{
		Store:        st,
		Seed:         []string{" Example.COM. ", "", "*.Docs.example.org", "localhost", "127.0.0.1", "[::1]", "removed.example.net"},
		AllowPrivate: true,
		Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
	}
	gate := func(f *webfetch.Fetcher, u string) prompt.Requirement {
		t.Helper()
		for _, tool := range f.Tools() {
			if tool.Name == webfetch.ToolFetch {
				req, err := tool.Gate(ctx, []byte(`{"url":"`+u+`"}`))
				if err != nil {
					t.Fatalf("gate %s: %v", u, err)
				}
				return req
			}
		}
		t.Fatal("no fetch tool")
		return prompt.Requirement{}
	}
	f, err := webfetch.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://example.com/", "https://a.docs.example.org/", "http://localhost:3000/",
		"http://[::1]/", "https://removed.example.net/", "https://golang.org/"} {
		if req := gate(f, u); req.Required {
			t.Errorf("%s: approval asked (%s); want listed", u, req.Reason)
		}
	}
	if got, _ := st.Domains(ctx); strings.Join(got, " ") != "golang.org" {
		t.Fatalf("store holds %v; want only what a human added", got)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "WEBFETCH_ALLOW_PRIVATE") {
		t.Fatalf("no warning about AllowPrivate in %q", logs.String())
	}

	// The next start, with one entry taken off the operator's list.
	cfg.Seed = cfg.Seed[:len(cfg.Seed)-1]
	f, err = webfetch.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if req := gate(f, "https://removed.example.net/"); !req.Required {
		t.Error("a host taken off the operator's list is still listed after a restart")
	}
	if req := gate(f, "https://golang.org/"); req.Required {
		t.Error("a host a human added is gone after a restart")
	}
}

func TestNewRefusesMalformedSeedNamingIt(t *testing.T) {
	for _, bad := range []string{"https://example.com", "example.com:8080", "exa mple.com", "*.*.x.com", "127.1",
		"*.example.local:80", "localhost:0", "localhost:65536", "localhost:http", "[::1]:", "nas.local:5000:1"} {
		st := webfetch.NewMemStore()
		_, err := webfetch.New(context.Background(), webfetch.Config{Store: st, Seed: []string{"good.example.com", bad}})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("seed %q: error %v; want one naming it", bad, err)
		}
		if d, _ := st.Domains(context.Background()); len(d) != 0 {
			t.Errorf("seed %q: store changed to %v despite the error", bad, d)
		}
	}
}

type failingStore struct{ webfetch.Store }

func (failingStore) AddDomain(context.Context, string, string) (bool, error) {
	return false, errors.New("disk full")
}

func (failingStore) Domains(context.Context) ([]string, error) { return nil, errors.New("disk full") }

func (failingStore) Entries(context.Context) (map[string]string, error) {
	return nil, errors.New("disk full")
}

func TestStoreErrorsAreReported(t *testing.T) {
	f, err := webfetch.New(context.Background(), webfetch.Config{Store: failingStore{}, Seed: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range f.Tools() {
		var in []byte
		switch tool.Name {
		case webfetch.ToolFetch:
			in = []byte(`{"url":"https://example.org/"}`)
		case webfetch.ToolListDomains:
			_, err := tool.Invoke(context.Background(), []byte(`{}`))
			if err == nil || !strings.Contains(err.Error(), "read the allowlist: disk full") {
				t.Fatalf("list error %v", err)
			}
			continue
		default:
			continue
		}
		_, err := tool.Gate(context.Background(), in)
		if err == nil || !strings.Contains(err.Error(), "read the allowlist: disk full") {
			t.Fatalf("gate error %v", err)
		}
	}
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := webfetch.New(context.Background(), webfetch.Config{}); err == nil {
		t.Error("no Store accepted")
	}
	if _, err := webfetch.New(context.Background(), webfetch.Config{Store: webfetch.NewMemStore(), Timeout: -time.Second}); err == nil {
		t.Error("negative Timeout accepted")
	}
}

func TestToolsAreNamedAndGatedAsSpecified(t *testing.T) {
	f, err := webfetch.New(context.Background(), webfetch.Config{Store: webfetch.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	gated := map[string]bool{}
	for _, tool := range f.Tools() {
		gated[tool.Name] = tool.Gate != nil
	}
	want := map[string]bool{
		webfetch.ToolFetch: true, webfetch.ToolAddDomain: true,
		webfetch.ToolListDomains: false, webfetch.ToolRemoveDomain: false,
	}
	if fmt.Sprint(gated) != fmt.Sprint(want) {
		t.Fatalf("tools %v; want %v", gated, want)
	}
	if _, err := prompt.NewService(prompt.Config{Model: prompttest.NewModel(), Store: prompttest.NewStore(), Tools: f.Tools()}); err != nil {
		t.Fatalf("the service refuses the tools: %v", err)
	}
}
