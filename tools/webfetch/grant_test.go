package webfetch_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"tollgate/prompt"
	"tollgate/prompt/prompttest"
	"tollgate/tools/webfetch"
)

// TestAlwaysForAFetchCoversItsHostExactly: "always" on a fetch grants its
// URL's host and nothing more: another page of that host runs without
// asking and is fetched; a subdomain and a parent domain still ask.
func TestAlwaysForAFetchCoversItsHostExactly(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Add(prompttest.Calls(fetchCall("c1", h.url("docs.example.org", "/a"))), prompttest.Answer("one"))
	c := h.run("read it")
	req := h.lastApproval()
	if req.Scope == nil || req.Scope.Label != "fetches from docs.example.org" {
		t.Fatalf("scope offered %+v, want the host", req.Scope)
	}
	if _, err := h.svc.ApproveAlways(context.Background(), req.ApprovalID, "alice", prompt.GrantSpec{}); err != nil {
		t.Fatal(err)
	}
	h.wait(c)
	wantState(t, c, prompt.StateCompleted)

	h.model.Add(prompttest.Calls(fetchCall("c2", h.url("docs.example.org", "/other?page=2"))), prompttest.Answer("two"))
	c2 := h.run("read more")
	wantState(t, c2, prompt.StateCompleted)
	if r := result(t, c2, "c2"); r.Type != prompt.ResultSuccess || !strings.Contains(r.Output, "content of docs.example.org") {
		t.Fatalf("granted fetch result %+v", r)
	}
	if it := c2.Prompt().Output[0]; it.Call == nil || it.Call.Grant == nil || it.Call.Grant.Scope != "host:docs.example.org" {
		t.Fatalf("granted call %+v does not name its grant", it.Call)
	}
	for i, host := range []string{"api.docs.example.org", "example.org"} {
		id := []string{"c3", "c4"}[i]
		h.model.Add(prompttest.Calls(fetchCall(id, h.url(host, "/"))))
		cn := h.run("read " + host)
		wantState(t, cn, prompt.StateWaiting)
		if err := h.svc.Cancel(context.Background(), cn.ID(), "test"); err != nil {
			t.Fatal(err)
		}
		h.wait(cn)
	}
	if h.hits.Load() != 2 {
		t.Fatalf("hits %d, want 2: only the approved and the granted fetch", h.hits.Load())
	}
}

// TestAddDomainOffersNoAlways: its approval is a lasting grant already.
func TestAddDomainOffersNoAlways(t *testing.T) {
	h := newHarness(t, nil)
	h.model.Add(prompttest.Calls(domainCall("c1", webfetch.ToolAddDomain, "example.net")))
	h.run("add it")
	req := h.lastApproval()
	if req.Scope != nil {
		t.Fatalf("add-domain offers always: %+v", req.Scope)
	}
	if _, err := h.svc.ApproveAlways(context.Background(), req.ApprovalID, "alice", prompt.GrantSpec{}); !errors.Is(err, prompt.ErrNoGrant) {
		t.Fatalf("ApproveAlways on add-domain: %v, want ErrNoGrant", err)
	}
}
