// Package egress keeps outbound requests of HTTP steps to the addresses an operator allows.
//
// The check runs at connect time on the IP address actually dialled, after name
// resolution, so a DNS name that resolves to an internal address, a rebinding DNS answer
// and an IPv4-mapped IPv6 literal are all caught. Loopback, private, link-local (cloud
// metadata services included), carrier-grade NAT, unique-local, multicast, reserved and
// unspecified addresses are refused unless a prefix in Policy.Allow opens them.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is matched by every *BlockedError.
var ErrBlocked = errors.New("destination blocked by the egress policy")

// BlockedError says which address was refused and why.
type BlockedError struct {
	Host   string
	Addr   netip.Addr
	Reason string
	// Own is set when the address is one of the process's own listeners (Policy.Own), on
	// Port: refused whatever Allow opens.
	Own  bool
	Port uint16
}

func (e *BlockedError) Error() string {
	if e.Own {
		what := netip.AddrPortFrom(e.Addr, e.Port).String()
		if e.Host != "" && e.Host != e.Addr.String() {
			what = fmt.Sprintf("%s (%s)", e.Host, what)
		}
		return fmt.Sprintf("destination %s is blocked: it is one of onceflow's own listeners (its API, console or metrics), which steps never reach, whatever --allow-net allows", what)
	}
	what := e.Addr.String()
	if e.Host != "" && e.Host != what {
		what = fmt.Sprintf("%s (%s)", e.Host, e.Addr)
	}
	return fmt.Sprintf("destination %s is blocked: %s address; if it is meant to be reached (a service on this machine or network), start onceflow with --allow-net %s", what, e.Reason, e.Fix())
}

// Fix is the smallest prefix that opens the blocked address: 127.0.0.1/32, ::1/128.
func (e *BlockedError) Fix() string {
	return netip.PrefixFrom(e.Addr, e.Addr.BitLen()).String()
}

// Is reports whether target is ErrBlocked.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// blocked lists the ranges refused by default, with the name used in errors.
var blocked = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	// IPv4-compatible IPv6 (::a.b.c.d, deprecated): some stacks still route it to the
	// IPv4 address it embeds, [::127.0.0.1] included.
	{netip.MustParsePrefix("::/96"), "IPv4-compatible IPv6"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Policy says where outbound requests may go. The zero value refuses every internal
// address and follows no redirects.
type Policy struct {
	// Allow opens prefixes that would otherwise be refused (e.g. 127.0.0.1/32 for a local
	// destination). An allowed prefix wins over a blocked range.
	Allow []netip.Prefix
	// MaxRedirects is how many redirects a request follows (default 0: a 3xx answer is
	// returned as the response). Each hop is checked like the first request.
	MaxRedirects int
	// LookupIP resolves host names (default net.DefaultResolver). Tests inject one.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// Own, when set, returns the addresses the process itself listens on — its API, web
	// console and metrics: a connection to one of them is refused whatever Allow opens, so
	// that a step (or a redirect it follows) cannot read the process's own answers, such
	// as /metrics, into an attempt log. It is asked at every connection, so listeners
	// opened after the Policy count too. A listener on an unspecified address (0.0.0.0,
	// ::) is reached at its port through loopback and every address of the machine: all
	// of them are refused there.
	Own func() []net.Addr
}

// Check returns a *BlockedError if addr may not be reached.
func (p *Policy) Check(host string, addr netip.Addr) error {
	addr = addr.Unmap()
	for _, a := range p.Allow {
		if a.Contains(addr) {
			return nil
		}
	}
	if addr.Zone() != "" {
		addr = addr.WithZone("")
	}
	for _, b := range blocked {
		if b.prefix.Contains(addr) {
			return &BlockedError{Host: host, Addr: addr, Reason: b.reason}
		}
	}
	if !addr.IsGlobalUnicast() {
		return &BlockedError{Host: host, Addr: addr, Reason: "non-unicast"}
	}
	return nil
}

// checkDial is Check for a connection to addr on port: also refused when it is one of the
// process's own listeners.
func (p *Policy) checkDial(host string, addr netip.Addr, port uint16) error {
	addr = addr.Unmap().WithZone("")
	if p.ownListener(addr, port) {
		return &BlockedError{Host: host, Addr: addr, Reason: "own listener", Own: true, Port: port}
	}
	return p.Check(host, addr)
}

// ownListener reports whether a connection to addr:port would reach one of p.Own's
// listeners.
func (p *Policy) ownListener(addr netip.Addr, port uint16) bool {
	if p.Own == nil {
		return false
	}
	var local []netip.Addr // the machine's addresses, looked up when a listener needs them
	for _, a := range p.Own() {
		lap, ok := listenAddr(a)
		if !ok || lap.Port() != port {
			continue
		}
		lip := lap.Addr().Unmap().WithZone("")
		switch {
		case lip == addr:
			return true
		case addr.IsUnspecified():
			// Connecting to 0.0.0.0 or :: reaches this machine, whatever it listens on.
			return true
		case lip.IsUnspecified():
			if addr.IsLoopback() {
				return true
			}
			if local == nil {
				local = machineAddrs()
			}
			for _, l := range local {
				if l == addr {
					return true
				}
			}
		}
	}
	return false
}

// listenAddr is a listener's TCP address as a netip.AddrPort.
func listenAddr(a net.Addr) (netip.AddrPort, bool) {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort(), true
	}
	if a == nil {
		return netip.AddrPort{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap, err == nil
}

// machineAddrs are the addresses of this machine's interfaces.
func machineAddrs() []netip.Addr {
	out := []netip.Addr{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// DialContext resolves address, refuses blocked IPs and the process's own listeners, and
// connects to the first allowed one that answers. The Control hook checks the address
// once more just before connect.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	portNum, err := net.LookupPort(network, port)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		lookup := p.LookupIP
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = lookup(ctx, host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("egress: %s has no addresses", host)
		}
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: func(_, raddr string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(raddr)
		if err != nil {
			return fmt.Errorf("egress: cannot check address %q: %w", raddr, err)
		}
		return p.checkDial(host, ap.Addr(), ap.Port())
	}}
	var firstErr error
	for _, a := range addrs {
		if err := p.checkDial(host, a, uint16(portNum)); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// Client returns an HTTP client whose every connection, redirects included, obeys p.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	t := &http.Transport{
		Proxy:                 nil, // a proxy would hide the destination from the check
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: t,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > p.MaxRedirects {
				return http.ErrUseLastResponse
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return &RedirectError{Scheme: req.URL.Scheme}
			}
			if origin(req) != origin(via[0]) {
				// net/http drops Authorization and cookies on its own; headers that carry
				// a secret under another name are dropped here.
				for _, name := range secretHeaders(req.Context()) {
					req.Header.Del(name)
				}
			}
			return nil
		},
	}
}

// ErrRedirectRefused is matched by every *RedirectError.
var ErrRedirectRefused = errors.New("redirect refused")

// RedirectError is a redirect that is never followed: to a scheme other than http or
// https (file:, gopher:, …). Nothing was sent to its target.
type RedirectError struct {
	Scheme string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("redirect to a %s: URL refused; only http and https redirects are followed", e.Scheme)
}

// Is reports whether target is ErrRedirectRefused.
func (e *RedirectError) Is(target error) bool { return target == ErrRedirectRefused }

// origin is a request's scheme, host and port.
func origin(r *http.Request) string {
	port := r.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[r.URL.Scheme]
	}
	return r.URL.Scheme + "://" + strings.ToLower(r.URL.Hostname()) + ":" + port
}

type secretHeadersKey struct{}

// WithSecretHeaders returns a context under which a request's headers names are dropped
// when a redirect leads to another origin (scheme, host or port): headers whose values
// carry a secret, such as X-Api-Key: {env.DEST_TOKEN}.
func WithSecretHeaders(ctx context.Context, names ...string) context.Context {
	if len(names) == 0 {
		return ctx
	}
	return context.WithValue(ctx, secretHeadersKey{}, names)
}

func secretHeaders(ctx context.Context) []string {
	names, _ := ctx.Value(secretHeadersKey{}).([]string)
	return names
}
