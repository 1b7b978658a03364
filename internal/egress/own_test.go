package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// ownServer is a server standing for one of the process's own listeners (its /metrics).
func ownServer(t *testing.T, addr string) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# HELP onceflow_runs runs in the database\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return ln, port
}

// A step never reaches the process's own listeners, although --allow-net opens their
// range: not directly, not after a redirect, not through 0.0.0.0 or another address of a
// listener on all interfaces. Other ports of the same address stay open.
func TestOwnListenersAreRefused(t *testing.T) {
	own, ownPort := ownServer(t, "127.0.0.1:0")
	all, allPort := ownServer(t, ":0") // on every interface
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+ownPort+"/metrics", http.StatusFound)
	}))
	defer redirect.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer other.Close()
	p := &Policy{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, MaxRedirects: 2,
		Own: func() []net.Addr { return []net.Addr{own.Addr(), all.Addr()} }}
	client := p.Client(5 * time.Second)
	get := func(u string) (string, error) {
		resp, err := client.Get(u)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), nil
	}
	targets := []string{
		"http://127.0.0.1:" + ownPort + "/metrics",
		redirect.URL + "/start", // a real redirect to the listener
		"http://0.0.0.0:" + ownPort + "/metrics",
		"http://127.0.0.1:" + allPort + "/metrics",
		"http://127.0.0.2:" + allPort + "/metrics",
		"http://[::ffff:127.0.0.1]:" + allPort + "/metrics",
		"http://localhost:" + ownPort + "/metrics",
	}
	for _, ip := range machineAddrs() {
		if ip.Is4() && !ip.IsLoopback() {
			targets = append(targets, "http://"+netip.AddrPortFrom(ip, mustPort(t, allPort)).String()+"/metrics")
		}
	}
	for _, u := range targets {
		body, err := get(u)
		var be *BlockedError
		if !errors.As(err, &be) || !be.Own || !errors.Is(err, ErrBlocked) || strings.Contains(body, "onceflow_runs") {
			t.Errorf("GET %s: %q, %v; want refused as one of onceflow's own listeners", u, body, err)
			continue
		}
		if strings.Contains(err.Error(), "--allow-net 127") || !strings.Contains(err.Error(), "own listeners") {
			t.Errorf("GET %s: the error %q should say that own listeners are never reached, not how to allow them", u, err)
		}
	}
	if body, err := get(other.URL); err != nil || body != "ok" {
		t.Errorf("another port of 127.0.0.1: %q, %v; want it reached", body, err)
	}
	// The dialer itself refuses too (e-mail steps use it).
	if _, err := p.DialContext(context.Background(), "tcp", "127.0.0.1:"+ownPort); !errors.Is(err, ErrBlocked) {
		t.Errorf("DialContext to the own listener: %v", err)
	}
}

func mustPort(t *testing.T, s string) uint16 {
	t.Helper()
	ap, err := netip.ParseAddrPort("127.0.0.1:" + s)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}
