//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bench

import "runtime/debug"

// rssBegin returns the memory the previous work left to the operating system. The peak
// resident set is not measured on this system.
func rssBegin() bool {
	debug.FreeOSMemory()
	return false
}

// rssPeak returns 0: the peak resident set is not measured on this system.
func rssPeak() float64 { return 0 }
