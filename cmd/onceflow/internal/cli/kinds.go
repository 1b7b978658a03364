package cli

import (
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
)

// fileReader reads workflow files against the standard step kinds with nothing to build
// with: what the commands that only read files need (validate, review, schedules, the
// masking of runs show).
func fileReader() *flowfile.Reader {
	kinds, err := stdsteps.New(stdsteps.Options{})
	if err != nil {
		panic(err) // without an environment, nothing can be misconfigured
	}
	return &flowfile.Reader{Kinds: kinds}
}
