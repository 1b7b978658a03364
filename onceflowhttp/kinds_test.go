package onceflowhttp

import (
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// readerWith reads workflow files against the standard step and trigger kinds; steps of kind go call
// the functions of funcs, looked up when they are built.
func readerWith(t testing.TB, funcs map[string]onceflow.StepFunc) *flowfile.Reader {
	t.Helper()
	kinds, err := stdsteps.New(stdsteps.Options{Funcs: funcs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kinds.Close() })
	trigs, err := stdtriggers.New()
	if err != nil {
		t.Fatal(err)
	}
	return &flowfile.Reader{Kinds: kinds, Triggers: trigs}
}

// buildWith builds checked definitions as the command does.
func buildWith(defs []*flowfile.Definition) ([]onceflow.Workflow, error) {
	return flowfile.NewBuilder(flowfile.BuildOptions{}).Workflows(defs)
}
