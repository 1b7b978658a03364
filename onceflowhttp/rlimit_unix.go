//go:build unix

package onceflowhttp

import "syscall"

// fileLimit is the process's open-file limit (the soft RLIMIT_NOFILE, which the Go runtime
// raises to the hard limit when the process starts).
func fileLimit() (int, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 0, false
	}
	if rl.Cur > 1<<30 {
		return 1 << 30, true
	}
	return int(rl.Cur), true
}
