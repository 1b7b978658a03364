package postgres_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store/postgres"
)

// faultProxy is a TCP proxy between the engine and PostgreSQL that can delay traffic, drop
// every connection (a reset on both sides) and half-close them (the database's side stops
// sending while the engine's writes still arrive).
type faultProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds added before each chunk is forwarded
	// lose counts COMMITs whose answer the proxy loses: the database commits, the
	// connection is reset before the client hears so. drop counts COMMITs the proxy
	// loses on the way to the database, resetting the connection instead.
	loseAnswers, dropCommits atomic.Int64
	lost                     atomic.Int64 // answers and COMMITs lost so far
	// refuse, while set, resets every new connection as soon as it is accepted, as a
	// server restarting does; refused counts them.
	refuse  atomic.Bool
	refused atomic.Int64
	mu      sync.Mutex
	conns   map[*proxyConn]bool
	wg      sync.WaitGroup
	opened  atomic.Int64
}

type proxyConn struct {
	client, server *net.TCPConn
	swallow        atomic.Bool // the next answer from the database is lost
	fe             frontendScanner
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, conns: map[*proxyConn]bool{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.drop()
		p.wg.Wait()
	})
	return p
}

func (p *faultProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			p.refused.Add(1)
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxyConn{client: c.(*net.TCPConn), server: s.(*net.TCPConn)}
		p.mu.Lock()
		p.conns[pc] = true
		p.mu.Unlock()
		p.opened.Add(1)
		var halves sync.WaitGroup
		halves.Go(func() { p.pipe(pc, pc.server, pc.client, true) })
		halves.Go(func() { p.pipe(pc, pc.client, pc.server, false) })
		p.wg.Go(func() {
			halves.Wait()
			pc.client.Close()
			pc.server.Close()
			p.mu.Lock()
			delete(p.conns, pc)
			p.mu.Unlock()
		})
	}
}

// pipe copies from src to dst, delayed as set, and half-closes dst when src ends. toServer
// says the direction; COMMITs and their answers are lost on it as set.
func (p *faultProxy) pipe(pc *proxyConn, dst, src *net.TCPConn, toServer bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d) // the injected latency itself
			}
			commit := toServer && pc.fe.commits(buf[:n])
			switch {
			case commit && take(&p.dropCommits):
				p.lost.Add(1)
				reset(pc)
				return
			case commit && take(&p.loseAnswers):
				pc.swallow.Store(true)
			case !toServer && pc.swallow.Load():
				p.lost.Add(1)
				reset(pc)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				_ = dst.CloseWrite()
			}
			return
		}
	}
}

// frontendScanner follows the messages a client sends PostgreSQL to tell which chunks
// execute a COMMIT: a simple query, or the extended protocol's Bind of a statement whose
// text is COMMIT (a COMMIT sent in a pipelined batch, prepared once per connection).
type frontendScanner struct {
	buf     []byte
	started bool            // the startup message, which has no type byte, was read
	commit  map[string]bool // prepared statement name -> whether its text is COMMIT
}

// commits adds a chunk and reports whether the messages it completes execute a COMMIT.
func (f *frontendScanner) commits(chunk []byte) bool {
	f.buf = append(f.buf, chunk...)
	if f.commit == nil {
		f.commit = map[string]bool{}
	}
	found := false
	for {
		head := 5
		if !f.started {
			head = 4
		}
		if len(f.buf) < head {
			return found
		}
		size := int(binary.BigEndian.Uint32(f.buf[head-4:head])) + head - 4
		if len(f.buf) < size {
			return found
		}
		msg := f.buf[:size]
		f.buf = f.buf[size:]
		if !f.started {
			// An SSL or GSS encryption request is followed by another startup message.
			f.started = size != 8
			continue
		}
		fields := bytes.Split(msg[5:], []byte{0})
		switch msg[0] {
		case 'Q':
			found = found || isCommitText(fields[0])
		case 'P':
			f.commit[string(fields[0])] = len(fields) > 1 && isCommitText(fields[1])
		case 'B':
			found = found || len(fields) > 1 && f.commit[string(fields[1])]
		}
	}
}

// isCommitText reports whether a statement's text is COMMIT.
func isCommitText(q []byte) bool {
	return bytes.EqualFold(bytes.TrimRight(bytes.TrimSpace(q), ";"), []byte("commit"))
}

// take decrements n if it is positive and reports whether it did.
func take(n *atomic.Int64) bool {
	for v := n.Load(); v > 0; v = n.Load() {
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
	return false
}

// reset closes both sides of a connection with a reset.
func reset(pc *proxyConn) {
	_ = pc.client.SetLinger(0)
	_ = pc.server.SetLinger(0)
	pc.client.Close()
	pc.server.Close()
}

// each applies fn to every open connection and returns how many there were.
func (p *faultProxy) each(fn func(*proxyConn)) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		fn(pc)
	}
	return len(p.conns)
}

// drop resets every open connection on both sides.
func (p *faultProxy) drop() int {
	return p.each(reset)
}

// halfClose ends the database-to-engine direction of every open connection: the engine
// reads end of file while its own writes still reach the database.
func (p *faultProxy) halfClose() int {
	return p.each(func(pc *proxyConn) {
		_ = pc.client.CloseWrite()
		_ = pc.server.CloseRead()
	})
}

// Engine and starter reach PostgreSQL through a proxy that first slows every packet down,
// then drops every connection, then half-closes every connection, while runs are being
// started and executed. Every acknowledged start completes and no effect is applied or
// completed twice.
func TestProxyFaults(t *testing.T) {
	t.Parallel()
	proxyWorkload(t, func(proxy *faultProxy, progress func(what string, requests int)) {
		// mustCut applies a fault to the open connections, waiting until there are some.
		mustCut := func(what string, fault func() int) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for fault() == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%s: no open connection to the database within 30 s", what)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		progress("work before the faults", 100)
		proxy.delay.Store(int64(30 * time.Millisecond))
		progress("work while the network is slow", 60)
		proxy.delay.Store(0)
		mustCut("drop", proxy.drop)
		progress("work after the drop", 100)
		mustCut("half-close", proxy.halfClose)
		progress("work after the half-close", 100)
		mustCut("drop", proxy.drop)
	})
}

// Through the proxy, COMMITs are lost: some answers never come back although the database
// committed (the connection is reset first), and some COMMITs never reach the database.
// Starts and step records whose commit is in doubt are retried; no acknowledged start is
// lost, and nothing committed twice applies an effect twice.
func TestProxyCommitsInDoubt(t *testing.T) {
	t.Parallel()
	proxyWorkload(t, func(proxy *faultProxy, progress func(what string, requests int)) {
		progress("work before the faults", 100)
		for i := range 5 {
			proxy.loseAnswers.Add(1)
			progress(fmt.Sprintf("work after commit answer %d was lost", i+1), 30)
			proxy.dropCommits.Add(1)
			progress(fmt.Sprintf("work after commit %d was lost", i+1), 30)
		}
		if n := proxy.lost.Load(); n < 10 {
			t.Fatalf("%d commits or their answers lost, want 10", n)
		}
	})
}

// proxyWorkload starts and executes runs through a fault proxy in front of PostgreSQL
// while faults injects its faults (progress waits until the destination received that
// many more requests), then checks that no acknowledged start was lost and no effect
// repeated.
func proxyWorkload(t *testing.T, faults func(proxy *faultProxy, progress func(what string, requests int))) {
	t.Helper()
	u, err := url.Parse(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	schema := newSchema(t)
	openStore(t, schema).Close() // create the schema directly, not through the faults
	proxy := newFaultProxy(t, u.Host)
	proxied := *u
	proxied.Host = proxy.ln.Addr().String()
	q := proxied.Query()
	q.Set("connect_timeout", "5")
	proxied.RawQuery = q.Encode()
	s, err := postgres.Open(t.Context(), proxied.String(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	logLedgerCompletions(t, schema)
	dest := newMPDestination(t)
	dest.kills = mpKills // no worker is killed here

	c, err := onceflow.New(onceflow.Config{Store: s, WorkerID: "proxied", Workers: 8, LeaseFor: 2 * time.Second,
		PollInterval: 50 * time.Millisecond, ReapInterval: 200 * time.Millisecond, EffectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(mpWorkflow(dest.URL, "0")); err != nil {
		t.Fatal(err)
	}
	serveCtx, stopServe := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- c.Serve(serveCtx) }()
	defer func() {
		stopServe()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	var (
		mu    sync.Mutex
		acked = map[string]int64{}
	)
	ctx, stopStarting := context.WithCancel(t.Context())
	var starters sync.WaitGroup
	for g := range 2 {
		starters.Go(func() {
			for i := g; ctx.Err() == nil; i += 2 {
				key := fmt.Sprintf("order-%05d", i)
				for ctx.Err() == nil {
					sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					run, err := c.Start(sctx, "mp", key, map[string]any{"order": i, "customer": i % mpCustomers})
					cancel()
					if err == nil {
						mu.Lock()
						acked[key] = run.ID
						mu.Unlock()
						break
					}
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		})
	}
	requests := func() int { dest.mu.Lock(); defer dest.mu.Unlock(); return dest.requests }
	progress := func(what string, more int) {
		t.Helper()
		want := requests() + more
		deadline := time.Now().Add(60 * time.Second)
		for requests() < want {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: %d requests after 60 s, want %d", what, requests(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	faults(proxy, progress)
	stopStarting()
	starters.Wait()

	mu.Lock()
	defer mu.Unlock()
	checkNoLossNoRepeat(t, s, schema, dest, acked, nil)
	t.Logf("connections opened through the proxy: %d; commits or answers lost: %d", proxy.opened.Load(), proxy.lost.Load())
}
