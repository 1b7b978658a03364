package postgres_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// faultProxy is a TCP proxy between the engine and PostgreSQL that can delay traffic, drop
// every connection (a reset on both sides) and half-close them (the database's side stops
// sending while the engine's writes still arrive). It follows the protocol's messages in
// both directions and forwards whole messages, so that it can lose one COMMIT or its
// answer exactly.
type faultProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds added before each chunk is forwarded
	// loseAnswers counts COMMITs whose answer the proxy loses: the database commits, the
	// connection is reset before the client hears so. dropCommits counts COMMITs the proxy
	// loses on the way to the database, resetting the connection instead (with whatever
	// the chunk holding them held). holdCommits counts COMMITs sent in a pipelined batch
	// that the proxy keeps from the database while it forwards the batch's other
	// statements and their answers; it resets the connection where the answer to COMMIT
	// would come: the client heard every statement succeed, and the database rolls the
	// transaction back.
	loseAnswers, dropCommits, holdCommits atomic.Int64
	lost                                  atomic.Int64 // answers and COMMITs lost so far
	held                                  atomic.Int64 // COMMITs held so far
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
	// holding is set once a COMMIT of this connection is held: the connection is reset
	// before the ReadyForQuery that ends its batch reaches the client.
	holding atomic.Bool
	// dropping is set while the messages of a held COMMIT (its Bind to its Execute) are
	// left out; only the client-to-database direction uses it.
	dropping bool
	fe       frontendScanner
	be       backendScanner
	// encryption counts the SSL or GSS encryption requests whose one-byte answer the
	// database has not sent yet.
	encryption atomic.Int32
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
// says the direction; COMMITs and their answers are lost or held on it as set.
func (p *faultProxy) pipe(pc *proxyConn, dst, src *net.TCPConn, toServer bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d) // the injected latency itself
			}
			var out []byte
			var cut bool
			if toServer {
				out, cut = p.fromClient(pc, buf[:n])
			} else {
				out, cut = p.fromServer(pc, buf[:n])
			}
			if len(out) > 0 {
				if _, werr := dst.Write(out); werr != nil {
					return
				}
			}
			if cut {
				reset(pc)
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

// fromClient returns the whole messages of a chunk from the client to forward, and whether
// the connection is to be reset after them.
func (p *faultProxy) fromClient(pc *proxyConn, chunk []byte) (out []byte, cut bool) {
	msgs := pc.fe.feed(chunk, &pc.encryption)
	commit := false
	for _, m := range msgs {
		commit = commit || m.commit
	}
	switch {
	case commit && take(&p.dropCommits):
		p.lost.Add(1)
		return nil, true
	case commit && take(&p.loseAnswers):
		pc.swallow.Store(true)
	}
	for _, m := range msgs {
		switch {
		case pc.dropping:
			pc.dropping = m.typ != 'E'
			continue
		case m.commit && m.typ == 'B' && take(&p.holdCommits):
			// Its Describe and Execute follow; the Sync that ends the batch is forwarded,
			// so the database answers the statements before COMMIT.
			pc.dropping = true
			pc.holding.Store(true)
			p.held.Add(1)
			continue
		}
		out = append(out, m.data...)
	}
	return out, false
}

// fromServer returns the whole messages of a chunk from the database to forward, and
// whether the connection is to be reset after them.
func (p *faultProxy) fromServer(pc *proxyConn, chunk []byte) (out []byte, cut bool) {
	if pc.swallow.Load() {
		p.lost.Add(1)
		return nil, true
	}
	for _, m := range pc.be.feed(chunk, &pc.encryption) {
		if m.typ == 'Z' && pc.holding.Load() {
			// The batch whose COMMIT was held is answered up to here: every statement
			// before COMMIT, and not COMMIT.
			return out, true
		}
		out = append(out, m.data...)
	}
	return out, false
}

// wireMsg is one protocol message.
type wireMsg struct {
	typ  byte   // its type; 0 for the untyped startup, encryption request and encryption answer
	data []byte // the whole message
	// commit is set for a client's message that executes a COMMIT: a simple query, or the
	// Bind of a statement whose text is COMMIT.
	commit bool
}

// frontendScanner follows the messages a client sends PostgreSQL to tell which execute a
// COMMIT: a simple query, or the extended protocol's Bind of a statement whose text is
// COMMIT (a COMMIT sent in a pipelined batch, prepared once per connection).
type frontendScanner struct {
	buf     []byte
	started bool            // the startup message, which has no type byte, was read
	commit  map[string]bool // prepared statement name -> whether its text is COMMIT
}

// feed adds a chunk and returns the messages it completes. An encryption request counts
// in encryption until the database's one-byte answer to it.
func (f *frontendScanner) feed(chunk []byte, encryption *atomic.Int32) []wireMsg {
	f.buf = append(f.buf, chunk...)
	if f.commit == nil {
		f.commit = map[string]bool{}
	}
	var msgs []wireMsg
	for {
		head := 5
		if !f.started {
			head = 4
		}
		if len(f.buf) < head {
			return msgs
		}
		size := int(binary.BigEndian.Uint32(f.buf[head-4:head])) + head - 4
		if len(f.buf) < size {
			return msgs
		}
		m := wireMsg{data: bytes.Clone(f.buf[:size])}
		f.buf = f.buf[size:]
		if !f.started {
			// An SSL or GSS encryption request is followed by another startup message.
			if size == 8 {
				encryption.Add(1)
			} else {
				f.started = true
			}
			msgs = append(msgs, m)
			continue
		}
		m.typ = m.data[0]
		fields := bytes.Split(m.data[5:], []byte{0})
		switch m.typ {
		case 'Q':
			m.commit = isCommitText(fields[0])
		case 'P':
			f.commit[string(fields[0])] = len(fields) > 1 && isCommitText(fields[1])
		case 'B':
			m.commit = len(fields) > 1 && f.commit[string(fields[1])]
		}
		msgs = append(msgs, m)
	}
}

// backendScanner splits what PostgreSQL sends a client into messages.
type backendScanner struct {
	buf []byte
	// opaque is set once the database accepted an encryption request: what follows is
	// encrypted and forwarded as it comes.
	opaque bool
}

// feed adds a chunk and returns the messages it completes.
func (b *backendScanner) feed(chunk []byte, encryption *atomic.Int32) []wireMsg {
	if b.opaque {
		return []wireMsg{{data: bytes.Clone(chunk)}}
	}
	b.buf = append(b.buf, chunk...)
	var msgs []wireMsg
	for len(b.buf) > 0 {
		if encryption.Load() > 0 {
			// The answer to an encryption request: one byte, N (no) or S/G (yes).
			encryption.Add(-1)
			m := wireMsg{data: bytes.Clone(b.buf[:1])}
			b.buf = b.buf[1:]
			msgs = append(msgs, m)
			if m.data[0] != 'N' {
				b.opaque = true
				msgs = append(msgs, wireMsg{data: bytes.Clone(b.buf)})
				b.buf = nil
			}
			continue
		}
		if len(b.buf) < 5 {
			break
		}
		size := int(binary.BigEndian.Uint32(b.buf[1:5])) + 1
		if len(b.buf) < size {
			break
		}
		msgs = append(msgs, wireMsg{typ: b.buf[0], data: bytes.Clone(b.buf[:size])})
		b.buf = b.buf[size:]
	}
	return msgs
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
// committed (the connection is reset first), some COMMITs never reach the database, and
// some COMMITs of pipelined batches are kept from the database alone while the batch's
// other statements are answered. Starts and step records whose commit is in doubt are
// retried; no acknowledged start is lost, and nothing committed twice applies an effect
// twice.
func TestProxyCommitsInDoubt(t *testing.T) {
	t.Parallel()
	proxyWorkload(t, func(proxy *faultProxy, progress func(what string, requests int)) {
		progress("work before the faults", 100)
		for i := range 5 {
			proxy.loseAnswers.Add(1)
			progress(fmt.Sprintf("work after commit answer %d was lost", i+1), 30)
			proxy.dropCommits.Add(1)
			progress(fmt.Sprintf("work after commit %d was lost", i+1), 30)
			proxy.holdCommits.Add(1)
			progress(fmt.Sprintf("work after commit %d of a batch was held", i+1), 30)
		}
		if n := proxy.lost.Load(); n < 10 {
			t.Fatalf("%d commits or their answers lost, want 10", n)
		}
		if n := proxy.held.Load(); n != 5 {
			t.Fatalf("%d commits of pipelined batches held, want 5", n)
		}
	})
}

// Through the proxy, the COMMIT sent in the same round trip as a transaction's last
// statements never reaches the database, while those statements are answered: the
// connection is reset where the answer to COMMIT would come, and the database rolls the
// transaction back. The caller gets an error that says the outcome is unknown, never a
// success for a start that was not stored, through the store and through the engine; a
// retry stores it.
func TestProxyCommitHeldAfterItsStatements(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	schema := newSchema(t)
	direct := openStore(t, schema) // creates the schema, and reads it without the proxy
	proxy := newFaultProxy(t, u.Host)
	proxied := *u
	proxied.Host = proxy.ln.Addr().String()
	ctx := t.Context()
	s, err := postgres.Open(ctx, proxied.String(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	params := func(key string) store.RunInsertParams {
		return store.RunInsertParams{Workflow: "orders", RunKey: key, Entity: "order:" + key, Input: json.RawMessage(`{}`), InputHash: "h",
			Now: base, Steps: []store.StepInsert{{Name: "a"}}}
	}
	notStored := func(what string, keys ...string) {
		t.Helper()
		for _, key := range keys {
			if r, err := direct.RunGetByKey(ctx, "orders", key); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: run %s is stored (%+v, %v), although its COMMIT never reached the database", what, key, r, err)
			}
		}
	}
	wantUnknown := func(what string, err error) {
		t.Helper()
		if err != nil && !strings.Contains(err.Error(), "may or may not have committed") {
			t.Errorf("%s: %v, want an error that says the outcome is unknown", what, err)
		}
	}

	proxy.holdCommits.Store(1)
	res, err := s.RunInsertMany(ctx, []store.RunInsertParams{params("order-1"), params("order-2")})
	if n := proxy.held.Load(); n != 1 {
		t.Fatalf("the proxy held %d COMMITs, want the batch's", n)
	}
	if err == nil {
		var ids []int64
		for _, r := range res {
			if r.Run != nil {
				ids = append(ids, r.Run.ID)
			}
		}
		t.Errorf("RunInsertMany acknowledged runs %v, whose COMMIT never reached the database", ids)
	}
	wantUnknown("RunInsertMany", err)
	notStored("RunInsertMany", "order-1", "order-2")
	res, err = s.RunInsertMany(ctx, []store.RunInsertParams{params("order-1"), params("order-2")})
	if err != nil || !res[0].Created || !res[1].Created {
		t.Fatalf("the retry: %+v, %v; want both runs created", res, err)
	}

	c, err := onceflow.New(onceflow.Config{Store: s, WorkerID: "held"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "orders", Steps: []onceflow.Step{{ID: "a", Do: func(context.Context, *onceflow.StepContext) (any, error) {
		return nil, nil
	}}}}); err != nil {
		t.Fatal(err)
	}
	proxy.holdCommits.Store(1)
	run, err := c.Start(ctx, "orders", "order-3", map[string]any{})
	if n := proxy.held.Load(); n != 2 {
		t.Fatalf("the proxy held %d COMMITs, want the start's too", n)
	}
	if err == nil {
		// Acknowledged: then it must be stored, whatever happened on the way.
		if r, gerr := direct.RunGetByKey(ctx, "orders", "order-3"); gerr != nil || r.ID != run.ID {
			t.Errorf("Start acknowledged run %d for order-3, which is not stored (%+v, %v)", run.ID, r, gerr)
		}
	} else {
		t.Logf("Start whose COMMIT was held: %v", err)
		wantUnknown("Start", err)
		notStored("Start", "order-3")
	}
	again, err := c.Start(ctx, "orders", "order-3", map[string]any{})
	if err != nil {
		t.Fatalf("Start again: %v", err)
	}
	if r, err := direct.RunGetByKey(ctx, "orders", "order-3"); err != nil || r.ID != again.ID {
		t.Fatalf("order-3 after the second start: %+v, %v; want run %d stored", r, err, again.ID)
	}
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
	t.Logf("connections opened through the proxy: %d; commits or answers lost: %d; commits of batches held: %d", proxy.opened.Load(), proxy.lost.Load(), proxy.held.Load())
}
