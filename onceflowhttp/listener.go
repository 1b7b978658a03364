package onceflowhttp

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultMaxConns is the number of connections LimitListener lets a listener hold when it
// is given none: half the process's open-file limit (RLIMIT_NOFILE), at most 4,096 and at
// least 16. The other half is left to what the process must still be able to open while
// its listener is full — the database pool, the steps' outbound HTTP, SMTP and broker
// connections, the console's and the metrics' listeners, files. The ceiling bounds what
// the connections themselves cost (each may hold a 64 KiB header while it is read). Where
// the limit cannot be read it is 1,024.
func DefaultMaxConns() int {
	n, ok := fileLimit()
	if !ok {
		return 1024
	}
	return min(max(n/2, 16), 4096)
}

// LimitListener returns a listener that lets hs hold at most maxConns connections of ln at
// once (0: DefaultMaxConns), so that clients — authenticated or not — cannot use up the
// process's file descriptors and stop it from accepting, reaching its database or sending
// its steps' requests (accept4: too many open files). It sets hs.ConnState, calling the
// function hs had there.
//
// While maxConns connections are open, the next one waits in the kernel's accept queue
// (holding no descriptor of the process) until one closes; if one of the open connections
// is idle — a keep-alive connection between requests — the longest idle one is closed at
// once to make room, so that idle connections held open cannot keep others out. A
// connection that is idle is closed anyway after hs.IdleTimeout (30 s with HTTPServer).
//
// Serve hs on the listener it returns:
//
//	hs := onceflowhttp.HTTPServer(handler)
//	ln, err := net.Listen("tcp", "127.0.0.1:8080")
//	…
//	err = hs.Serve(onceflowhttp.LimitListener(hs, ln, 0))
func LimitListener(hs *http.Server, ln net.Listener, maxConns int) net.Listener {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns()
	}
	l := &limitListener{Listener: ln, max: maxConns, idle: map[*limitedConn]time.Time{},
		changed: make(chan struct{}, 1), done: make(chan struct{})}
	prev := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		if lc, ok := c.(*limitedConn); ok && lc.l == l {
			l.state(lc, st)
		}
		if prev != nil {
			prev(c, st)
		}
	}
	return l
}

// limitListener is what LimitListener returns.
type limitListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open int                        // connections accepted and not yet closed
	idle map[*limitedConn]time.Time // open connections between requests, since when
	// changed is signalled when a connection closes or becomes idle: a full listener
	// looks again.
	changed chan struct{}
	done    chan struct{} // closed by Close
	closing sync.Once
}

// Accept waits until fewer than max connections are open — closing the longest idle one
// when none is free — and accepts the next connection.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			break
		}
		oldest := l.oldestIdle()
		if oldest != nil {
			delete(l.idle, oldest)
		}
		l.mu.Unlock()
		if oldest != nil {
			_ = oldest.Close() // frees its place when it returns
			continue
		}
		select {
		case <-l.changed:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release()
		return nil, err
	}
	return &limitedConn{Conn: c, l: l}, nil
}

// oldestIdle is the connection idle longest, or nil; l.mu is held.
func (l *limitListener) oldestIdle() *limitedConn {
	var oldest *limitedConn
	var since time.Time
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	return oldest
}

// Close closes the listener and ends an Accept that waits for room.
func (l *limitListener) Close() error {
	l.closing.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// release gives back a connection's place.
func (l *limitListener) release() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
	l.signal()
}

func (l *limitListener) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// state follows a connection's state as the server reports it: an idle one may be closed
// to make room, any other may not.
func (l *limitListener) state(c *limitedConn, st http.ConnState) {
	l.mu.Lock()
	if st == http.StateIdle && !c.isClosed() {
		l.idle[c] = time.Now()
	} else {
		delete(l.idle, c)
	}
	l.mu.Unlock()
	if st == http.StateIdle {
		l.signal()
	}
}

// limitedConn is a connection of a limitListener: closing it frees its place, once.
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
	mu   sync.Mutex
	done bool
}

func (c *limitedConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.mu.Lock()
		c.done = true
		c.mu.Unlock()
		c.l.mu.Lock()
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		c.l.release()
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
