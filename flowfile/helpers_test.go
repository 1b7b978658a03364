package flowfile

import (
	"net/netip"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// testReader reads files against the standard kinds with no options: enough to check
// files, and to build steps of every kind but email, transition and go.
var testReader = readerOf(stdsteps.Options{})

func readerOf(o stdsteps.Options) *Reader {
	kinds, err := stdsteps.New(o)
	if err != nil {
		panic(err)
	}
	return &Reader{Kinds: kinds, Triggers: testTriggers}
}

// readerWith reads files against the standard kinds with o, closing their connections
// when the test ends.
func readerWith(t testing.TB, o stdsteps.Options) *Reader {
	t.Helper()
	kinds, err := stdsteps.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kinds.Close() })
	return &Reader{Kinds: kinds, Triggers: testTriggers}
}

// testTriggers are the standard trigger kinds.
var testTriggers = func() *triggers.Registry {
	r, err := stdtriggers.New()
	if err != nil {
		panic(err)
	}
	return r
}()

// loopback lets steps reach the test's servers on 127.0.0.1.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// withFuncs reads files against the standard kinds, with funcs for steps of kind go.
func withFuncs(t testing.TB, funcs map[string]onceflow.StepFunc) *Reader {
	return readerWith(t, stdsteps.Options{Funcs: funcs})
}
