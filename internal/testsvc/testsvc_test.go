package testsvc

import (
	"net"
	"os"
	"strings"
	"testing"
)

// Without its variable, a service is found at its default address when something answers
// there, and the variable is set for the child processes of the test; when nothing answers
// the test is skipped, counted, and the package's line says which service and how to
// enable it.
func TestDefaultAddressesAndTheSkipLine(t *testing.T) {
	t.Setenv("CI", "") // under CI=true a missing service fails the test by design
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	const answering, silent = "ONCEFLOW_TEST_ANSWERING_URL", "ONCEFLOW_TEST_SILENT_URL"
	defaults[answering], services[answering] = "nats://"+ln.Addr().String(), "an answering service"
	defaults[silent], services[silent] = "nats://"+closedAddr, "a silent service"
	t.Cleanup(func() {
		delete(defaults, answering)
		delete(defaults, silent)
		os.Unsetenv(answering)
		probeMu.Lock()
		delete(probes, answering)
		delete(probes, silent)
		delete(skips, silent)
		probeMu.Unlock()
	})
	t.Setenv(answering, "")
	t.Setenv(silent, "")

	if got := need(t, answering); got != defaults[answering] {
		t.Fatalf("need = %q, want the default %q", got, defaults[answering])
	}
	if os.Getenv(answering) != defaults[answering] {
		t.Fatalf("%s not set for child processes: %q", answering, os.Getenv(answering))
	}
	for range 2 {
		ok := t.Run("silent", func(t *testing.T) { need(t, silent) })
		if !ok {
			t.Fatal("a test whose service does not answer failed instead of being skipped")
		}
	}
	line := skipLine()
	for _, want := range []string{"2 tests skipped", "a silent service (2, nothing answers on " + closedAddr, "set " + silent} {
		if !strings.Contains(line, want) {
			t.Fatalf("skip line %q does not say %q", line, want)
		}
	}
}
