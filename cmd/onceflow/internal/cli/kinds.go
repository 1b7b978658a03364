package cli

import (
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// fileReader reads workflow files against the standard step and trigger kinds with nothing to build
// with: what the commands that only read files need (validate, review, schedules, the
// masking of runs show).
func fileReader() *flowfile.Reader {
	kinds, err := stdsteps.New(stdsteps.Options{})
	if err != nil {
		panic(err) // without an environment, nothing can be misconfigured
	}
	trigs, err := stdtriggers.New()
	if err != nil {
		panic(err) // the standard trigger kinds register without a conflict
	}
	return &flowfile.Reader{Kinds: kinds, Triggers: trigs}
}
