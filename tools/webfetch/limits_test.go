package webfetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestConcurrentFetchesWaitForASlot: with MaxConcurrent 2, two fetches
// reach the server and the other three wait (the log says so) until a
// slot is free; then all finish.
func TestConcurrentFetchesWaitForASlot(t *testing.T) {
	arrived := make(chan struct{}, 5)
	release := make(chan struct{})
	port := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, "ok")
	}))
	waits := make(chan struct{}, 5)
	logs, logger := newLogCapture()
	logs.onWrite = func(line string) {
		if strings.Contains(line, "waits for a free slot") {
			waits <- struct{}{}
		}
	}
	f := newFetcher(t, Config{AllowPrivate: true, MaxConcurrent: 2, Logger: logger})
	errs := make(chan error, 5)
	for range 5 {
		go func() {
			_, err := invoke(t, f, "http://example.com:"+port+"/")
			errs <- err
		}()
	}
	in, waiting := 0, 0
	for in < 2 || waiting < 3 {
		select {
		case <-arrived:
			in++
			if in > 2 {
				t.Fatalf("%d fetches reached the server at once; MaxConcurrent is 2", in)
			}
		case <-waits:
			waiting++
		}
	}
	close(release)
	for range 5 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestWaitingFetchEndsWithItsContext: a fetch waiting for a slot stops
// waiting when its context ends.
func TestWaitingFetchEndsWithItsContext(t *testing.T) {
	f := newFetcher(t, Config{MaxConcurrent: 1})
	tg, err := f.checkURL("https://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	f.slots <- struct{}{} // the one slot is taken
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.fetch(ctx, tg, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v; want context.Canceled", err)
	}
}

// TestOperatorPorts: WEBFETCH_PORTS opens ports for public hosts; the
// address checks stay on for them, and other ports stay closed.
func TestOperatorPorts(t *testing.T) {
	f := newFetcher(t, Config{Ports: []int{8080, 8443}})
	fetch := toolByName(t, f, ToolFetch)
	for _, tt := range []struct {
		url  string
		want verdict
	}{
		{"https://example.com:8443/", listed},
		{"http://example.com:8080/", listed},
		{"https://unlisted.example.org:8443/", approve("unlisted.example.org")},
		{"https://8.8.8.8:8443/", approve("8.8.8.8")},
		{"http://10.0.0.1:8080/", refuse("the address is private")},
		{"http://127.0.0.1:8443/", refuse("the address is private")},
		{"http://169.254.169.254:8080/", refuse("metadata")},
		{"http://example.com:22/", refuse("port 22 is not open for fetches (only 80, 443 and 8080, 8443)")},
		{"http://example.com:8081/", refuse("port 8081")},
	} {
		checkVerdict(t, fetch, map[string]string{"url": tt.url}, tt.want)
	}
	for addr, ok := range map[string]bool{
		"93.184.215.14:8443": true, "93.184.215.14:22": false, "10.0.0.1:8080": false, "[fd00::1]:8443": false,
	} {
		ap := netip.MustParseAddrPort(addr)
		network := "tcp4"
		if ap.Addr().Is6() {
			network = "tcp6"
		}
		if err := f.control(context.Background(), network, addr, nil); (err == nil) != ok {
			t.Errorf("control(%s) = %v; want ok=%v", addr, err, ok)
		}
	}
	for _, bad := range []int{0, -1, 65536} {
		if _, err := New(context.Background(), Config{Store: NewMemStore(), Ports: []int{bad}}); err == nil {
			t.Errorf("New accepted port %d", bad)
		}
	}
}

// TestMetadataRefusedInEveryMode: the cloud metadata and host-channel
// addresses, and their translated IPv6 forms, are refused with the checks
// on, under AllowPrivate, and when the operator seeds one.
func TestMetadataRefusedInEveryMode(t *testing.T) {
	addrs := []string{
		"169.254.169.254", "169.254.170.2", "169.254.170.23", "169.254.0.23", // AWS, ECS, EKS Pod Identity, Tencent
		"fd00:ec2::254", "fd00:ec2::253", "fd00:ec2::123", "fd00:ec2::23", // AWS over IPv6
		"fd20:ce::254",    // GCP over IPv6
		"192.0.0.192",     // Oracle
		"100.100.100.200", // Alibaba
		"168.63.129.16",   // Azure WireServer: public
		"::ffff:168.63.129.16", "64:ff9b::a83f:8110", "2002:a83f:8110::1", "64:ff9b::c000:c0", "::ffff:192.0.0.192",
	}
	modes := map[string]*Fetcher{
		"checks on":     newFetcher(t, Config{}),
		"allow private": newFetcher(t, Config{AllowPrivate: true}),
		"seeded":        newFetcher(t, Config{Seed: addrs}),
	}
	for mode, f := range modes {
		for _, a := range addrs {
			ip := netip.MustParseAddr(a)
			host := a
			if ip.Is6() {
				host = "[" + a + "]"
			}
			if _, err := f.checkURL("http://" + host + "/"); !errors.Is(err, ErrBlocked) {
				t.Errorf("%s: checkURL(%s) = %v; want ErrBlocked", mode, a, err)
			}
			network := "tcp4"
			if ip.Is6() && !ip.Is4In6() {
				network = "tcp6"
			}
			var err error
			if mode == "seeded" {
				err = f.controlInternal(context.Background(), network, host+":80", nil)
			} else {
				err = f.control(context.Background(), network, host+":80", nil)
			}
			if !errors.Is(err, ErrBlocked) {
				t.Errorf("%s: connect to %s = %v; want ErrBlocked", mode, a, err)
			}
		}
	}
}

// TestOperatorPortHoldsAcrossRedirects: an internal host the operator
// opened on one port cannot be walked to another by a redirect, nor
// reached there at connect time.
func TestOperatorPortHoldsAcrossRedirects(t *testing.T) {
	other := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "the service on the other port")
	}))
	open := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://nas.local:"+other+"/", http.StatusFound)
	}))
	r := newResolver()
	r.hosts["nas.local"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	f := newFetcher(t, Config{Seed: []string{"nas.local:" + open}, Resolver: r})
	_, err := invoke(t, f, "http://nas.local:"+open+"/")
	if err == nil || !strings.Contains(err.Error(), "opens nas.local on port "+open+" only") {
		t.Fatalf("redirect to another port of an operator host: %v; want refused", err)
	}
	if _, err := invoke(t, f, "http://nas.local:"+other+"/"); err == nil {
		t.Fatal("the other port was fetched directly")
	}
	ctx := context.WithValue(context.Background(), dialHostKey{}, "nas.local")
	if err := f.controlInternal(ctx, "tcp4", "127.0.0.1:"+other, nil); err == nil {
		t.Fatal("connect to the other port of an operator host was allowed")
	}
	if err := f.controlInternal(ctx, "tcp4", "127.0.0.1:"+open, nil); err != nil {
		t.Fatalf("connect to the opened port: %v", err)
	}
}
