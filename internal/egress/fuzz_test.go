package egress

import (
	"errors"
	"net/netip"
	"testing"
)

// internal reports whether a, with any IPv4 mapping and zone removed, is an address the
// default policy must refuse: not a global unicast address, or in a private, loopback,
// link-local, shared, reserved or documentation range.
func internal(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, b := range blocked {
		if b.prefix.Contains(a) {
			return true
		}
	}
	return false
}

// ipv4Compatible reports whether a is a deprecated IPv4-compatible IPv6 address (::a.b.c.d).
func ipv4Compatible(a netip.Addr) bool {
	b := a.As16()
	return a.Is6() && !a.Is4In6() && b == [16]byte{12: b[12], 13: b[13], 14: b[14], 15: b[15]} && a.Unmap() != netip.IPv6Unspecified() &&
		a.WithZone("") != netip.IPv6Loopback()
}

// FuzzCheck checks the egress address check on any address, written as text or given as
// 16 bytes: it never panics; the default policy allows no internal address in any
// spelling (IPv4-mapped, with a zone); an allowed prefix opens exactly what it contains;
// and a refusal is a *BlockedError that matches ErrBlocked.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1",
		"fe80::1%eth0", "fd00::1", "100.64.0.1", "0.0.0.0", "::", "93.184.216.34", "2606:4700::1111", "64:ff9b::7f00:1",
		"224.0.0.1", "255.255.255.255", "192.0.2.1", "2001:db8::1", "ff02::1", "198.18.0.1", "1.1.1.1%zone", "::127.0.0.1", "::10.0.0.1"} {
		f.Add(s, []byte(nil), "127.0.0.1/32")
	}
	f.Add("", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, "10.0.0.0/8")
	f.Add("", []byte{0x20, 0x01, 0x48, 0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x88}, "2001:4860::/32")
	f.Fuzz(func(t *testing.T, text string, raw []byte, allow string) {
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(text); err == nil {
			addrs = append(addrs, a)
		}
		if a, ok := netip.AddrFromSlice(raw); ok {
			addrs = append(addrs, a)
		}
		var p Policy
		allowed, allowErr := netip.ParsePrefix(allow)
		if allowErr == nil {
			p.Allow = []netip.Prefix{allowed.Masked()}
		}
		for _, a := range addrs {
			def := (&Policy{}).Check("host.example", a)
			if def != nil {
				var be *BlockedError
				if !errors.As(def, &be) || !errors.Is(def, ErrBlocked) || be.Reason == "" {
					t.Fatalf("Check(%s) = %#v, want a *BlockedError with a reason", a, def)
				}
			}
			if def == nil && ipv4Compatible(a) {
				t.Fatalf("the default policy allows the IPv4-compatible address %s", a)
			}
			if def == nil && internal(a) {
				t.Fatalf("the default policy allows the internal address %s", a)
			}
			if allowErr != nil {
				continue
			}
			got := p.Check("host.example", a)
			// An IPv4-compatible address (::a.b.c.d) stays blocked unless a prefix opens that
			// spelling itself: opening 127.0.0.1/32 does not open ::127.0.0.1.
			want := def == nil || p.Allow[0].Contains(a.Unmap())
			if (got == nil) != want {
				t.Fatalf("Check(%s) with Allow %s = %v; want allowed %v", a, p.Allow[0], got, want)
			}
		}
	})
}
