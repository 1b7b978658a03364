package cli

import (
	"net"
	"net/http"
	"slices"
	"sync"

	"github.com/onceflow/onceflow/onceflowhttp"
)

// listeners are the addresses serve and worker listen on. Steps never connect to them
// (flowfile.Options.Listeners): a redirect to the process's own /metrics is refused, even
// when --allow-net opens loopback.
type listeners struct {
	mu    sync.Mutex
	addrs []net.Addr
}

// listen listens on addr (TCP) and remembers the address.
func (l *listeners) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l.add(ln)
	return ln, nil
}

// add remembers the address of a listener opened elsewhere.
func (l *listeners) add(ln net.Listener) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addrs = append(l.addrs, ln.Addr())
}

// Addrs returns the addresses listened on so far.
func (l *listeners) Addrs() []net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.addrs)
}

// connLimits are the connections each listener may hold at once: the API's (--max-conns,
// by default onceflowhttp.DefaultMaxConns: half the open-file limit), and the console's and
// the metrics' own listeners', a quarter of it each, at most 256 — together below the
// file limit, with room left for the database pool and the steps' connections.
func connLimits(maxConns int) (api, side int) {
	api = maxConns
	if api <= 0 {
		api = onceflowhttp.DefaultMaxConns()
	}
	return api, min(256, max(4, api/4))
}

// serveLimited serves hs on ln, holding at most maxConns connections, and reports the
// server's error (nil once it is shut down).
func serveLimited(hs *http.Server, ln net.Listener, maxConns int) error {
	err := hs.Serve(onceflowhttp.LimitListener(hs, ln, maxConns))
	if err == http.ErrServerClosed {
		return nil
	}
	return err
}
