//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bench

import (
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
)

// rssBegin returns the memory the previous work left to the operating system and, on
// Linux, resets the process's peak resident set, so that rssPeak measures what follows.
// It reports whether the peak was reset.
func rssBegin() bool {
	debug.FreeOSMemory()
	// Writing 5 to clear_refs resets the peak RSS (Linux 4.0 and later).
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// rssPeak returns the process's peak resident set size in MiB.
func rssPeak() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	b := float64(ru.Maxrss) * 1024 // KiB
	if runtime.GOOS == "darwin" {
		b = float64(ru.Maxrss) // bytes
	}
	return round(b/(1<<20), 1)
}
