package examples_test

import (
	"testing"

	"github.com/onceflow/onceflow/examples"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// Every embedded example is a valid workflow file, and no two define the same workflow.
func TestExamplesAreValid(t *testing.T) {
	files := examples.Files()
	for _, want := range []string{"website-lead.yaml", "payment-webhook.yaml", "order-events.yaml", "monthly-invoices.yaml", "lead-follow-up.yaml"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s is not embedded (have %d files)", want, len(files))
		}
	}
	kinds, err := stdsteps.New(stdsteps.Options{})
	if err != nil {
		t.Fatal(err)
	}
	trigs, err := stdtriggers.New()
	if err != nil {
		t.Fatal(err)
	}
	reader := &flowfile.Reader{Kinds: kinds, Triggers: trigs}
	names := map[string]string{}
	for file, src := range files {
		d, problems := reader.Parse(file, src)
		if len(problems) > 0 {
			t.Errorf("%s:\n%v", file, problems)
			continue
		}
		if prev, dup := names[d.Name]; dup {
			t.Errorf("%s and %s both define workflow %q", prev, file, d.Name)
		}
		names[d.Name] = file
	}
}
