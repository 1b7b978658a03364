//go:build unix

package cli

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// setFileLimit sets the process's open-file limit, soft and hard, to v (when it is a
// number), for tests of what happens at it.
func setFileLimit(v string) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		fmt.Fprintln(os.Stderr, "ONCEFLOW_TEST_NOFILE:", err)
		os.Exit(2)
	}
}
