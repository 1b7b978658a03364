//go:build !unix

package onceflowhttp

// fileLimit is unknown where there is no RLIMIT_NOFILE.
func fileLimit() (int, bool) { return 0, false }
