package onceflowhttp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// stalledBody opens a connection that announces a body of n bytes to path, sends a few of
// them and stops: the server's handler waits for the rest, holding what it read.
func stalledBody(t *testing.T, base, path string, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nStripe-Signature: t=1,v1=00\r\nContent-Length: %d\r\n\r\n{\"id\":", path, n)
	return c
}

// The request bodies held in memory at once are bounded: while unauthenticated webhook
// deliveries that announce 1 MiB each hold the budget (8 MiB by default), the next body is
// not read but answered 503 server-busy with Retry-After, and once they are gone bodies
// are read again.
func TestBodiesInMemoryAreBounded(t *testing.T) {
	const maxBody = 1 << 20
	b := setupWith(t, func(c *Options) { c.MaxBody = maxBody }, fmt.Sprintf(paymentYAML, "payments", "stripe", `"{input.id}"`))
	// Served without the OpenAPI checker, which reads each body before the handler does.
	srv, err := NewHandler(b.client, Options{Receivers: receivers(t, b.defs(t, leadYAML, fmt.Sprintf(paymentYAML, "payments", "stripe", `"{input.id}"`)), b.env), MaxBody: maxBody})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close) // after the stalled connections' cleanups close them
	b.url = hs.URL
	var stalled []net.Conn
	for range 8 {
		stalled = append(stalled, stalledBody(t, b.url, "/hooks/payments", maxBody))
	}
	probe := func() answer {
		return b.do("POST", "/hooks/payments", "", map[string]string{"Stripe-Signature": "t=1,v1=00"}, `{"id": "evt_1"}`)
	}
	// The stalled requests reach their handlers in their own time: ask until the budget is
	// full.
	deadline := time.Now().Add(20 * time.Second)
	var a answer
	for a = probe(); a.status != http.StatusServiceUnavailable; a = probe() {
		if time.Now().After(deadline) {
			t.Fatalf("8 request bodies of 1 MiB held at once, and a 9th is still read: %d %s; want 503 server-busy", a.status, a.body)
		}
	}
	wantStatus(t, a, http.StatusServiceUnavailable, "server-busy")
	if a.header.Get("Retry-After") != "1" {
		t.Errorf("server-busy without Retry-After: %v", a.header)
	}
	for _, c := range stalled {
		c.Close()
	}
	deadline = time.Now().Add(20 * time.Second)
	for a = probe(); a.status == http.StatusServiceUnavailable; a = probe() {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled bodies are gone and bodies are still refused: %s", a.body)
		}
	}
	if a.status != http.StatusBadRequest && a.status != http.StatusUnauthorized {
		t.Errorf("a delivery with a bad signature once the budget is free: %d %s", a.status, a.body)
	}
	// A body announced larger than MaxBody is refused before any of it is read.
	c := stalledBody(t, b.url, "/hooks/payments", maxBody+1)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body announced larger than the limit: %v %v", resp, err)
	}
	resp.Body.Close()
}

// LimitListener: the server never holds more than its limit of connections; idle
// keep-alive connections are closed to make room for a new one, busy ones are not, and a
// connection beyond the limit is served as soon as one closes.
func TestLimitListener(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	})
	hs := HTTPServer(h)
	hs.IdleTimeout = time.Hour // only the listener closes idle connections here
	var mu sync.Mutex
	open, peak := 0, 0
	closed := make(chan struct{}, 64)
	hs.ConnState = func(_ net.Conn, st http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch st {
		case http.StateNew:
			open++
			peak = max(peak, open)
		case http.StateClosed, http.StateHijacked:
			open--
			closed <- struct{}{}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(LimitListener(hs, ln, 2)) }()
	defer func() {
		hs.Close()
		<-served
	}()
	addr := ln.Addr().String()
	// conn sends GET path on a new connection.
	type conn struct {
		net.Conn
		r *bufio.Reader
	}
	dial := func(path string) conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		return conn{c, bufio.NewReader(c)}
	}
	read := func(c conn) (string, error) {
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	// Two idle keep-alive connections fill the listener; a third is served all the same,
	// by closing the one idle longest.
	a, b := dial("/"), dial("/")
	for _, c := range []conn{a, b} {
		if body, err := read(c); err != nil || body != "ok" {
			t.Fatalf("first requests: %q %v", body, err)
		}
	}
	c := dial("/")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if body, err := read(c); err != nil || body != "ok" {
		t.Fatalf("a third connection while two idle ones are open: %q %v", body, err)
	}
	// One of the two idle ones was closed to make room (the one idle longest, which of the
	// two that is depends on when their answers were finished).
	evicted := make(chan error, 2)
	for _, idle := range []conn{a, b} {
		idle.SetReadDeadline(time.Now().Add(10 * time.Second))
		go func() { _, err := idle.r.ReadByte(); evicted <- err }()
	}
	if err := <-evicted; err != io.EOF {
		t.Fatalf("no idle connection was closed to make room for a new one: %v", err)
	}
	// Two busy connections fill it; a third waits, unserved, until one of them is done.
	a.Close()
	b.Close()
	c.Close()
	<-evicted
	for range 3 {
		<-closed
	}
	s1, s2 := dial("/slow"), dial("/slow")
	<-entered
	<-entered
	waiting := dial("/")
	close(release)
	for _, c := range []conn{s1, s2, waiting} {
		if body, err := read(c); err != nil || body != "ok" {
			t.Fatalf("after the busy requests: %q %v", body, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if peak > 2 {
		t.Errorf("the server held %d connections at once; the limit is 2", peak)
	}
}

func TestDefaultMaxConns(t *testing.T) {
	n := DefaultMaxConns()
	if limit, ok := fileLimit(); ok && (n > limit/2 && n > 16 || n > 4096) {
		t.Errorf("DefaultMaxConns() = %d with a file limit of %d: want at most half of it, at most 4096", n, limit)
	}
}
