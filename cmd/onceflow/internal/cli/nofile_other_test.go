//go:build !unix

package cli

// setFileLimit does nothing where there is no RLIMIT_NOFILE.
func setFileLimit(string) {}
