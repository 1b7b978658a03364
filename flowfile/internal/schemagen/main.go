// Command schemagen writes the files generated from the standard step and trigger kinds:
// flowfile/workflow.schema.json (the JSON Schema of a workflow file, for editors) and
// docs/steps.md (the kinds' reference). Run it with `go generate ./flowfile` (or
// `make schema`) after changing a kind's Spec; a test fails while either file is stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

func main() {
	// go generate runs in the directory of the file that asks: flowfile/.
	out := "."
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	if err := generate(out); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func generate(dir string) error {
	kinds, err := stdsteps.New(stdsteps.Options{})
	if err != nil {
		return err
	}
	trigs, err := stdtriggers.New()
	if err != nil {
		return err
	}
	schema, err := flowfile.Schema(kinds, trigs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "workflow.schema.json"), schema, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "..", "docs", "steps.md"), kinds.Reference(), 0o644)
}
