package flowfile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

func TestRetentionBuildsStepRetention(t *testing.T) {
	t.Parallel()
	src := `name: receipts
steps:
  - id: invoice
    kind: go
    func: f
    retention: forever
  - id: stock
    kind: go
    func: f
  - id: receipt
    kind: go
    func: f
    retention: 90d
  - id: reminder
    kind: go
    func: f
    retention: 36h
`
	fn := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	def, ps := withFuncs(t, map[string]onceflow.StepFunc{"f": fn}).Parse("receipts.yaml", []byte(src))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	ws, err := NewBuilder(BuildOptions{}).Workflows([]*Definition{def})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"invoice": 0, "stock": 0, "receipt": 90 * 24 * time.Hour, "reminder": 36 * time.Hour}
	for _, s := range ws[0].Steps {
		if s.Retention != want[s.ID] {
			t.Errorf("step %s: Retention = %v, want %v (0 is forever)", s.ID, s.Retention, want[s.ID])
		}
	}
}

func TestRetentionRejectsZeroAndNonsense(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0d", "0s", "-5d", "someday", "90"} {
		src := "name: w\nsteps:\n  - id: a\n    kind: go\n    func: f\n    retention: " + v + "\n"
		_, ps := testReader.Parse("w.yaml", []byte(src))
		if !strings.Contains(ps.Error(), "w.yaml:6:16: step \"a\": retention \""+v+"\" is not forever or a positive duration") {
			t.Errorf("retention %s: problems %v, want one at 6:16", v, ps)
		}
	}
}
