package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/demo"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunPerformsEveryEffectOnce(t *testing.T) {
	t.Parallel()
	var progress bytes.Buffer
	sum, err := demo.Run(context.Background(), demo.Config{
		DBPath:   filepath.Join(t.TempDir(), "demo.db"),
		Runs:     16,
		Workers:  4,
		Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.InvariantsOK {
		t.Fatalf("invariants failed: %v", sum.Failures())
	}
	if n := sum.DuplicateEffects(); n != 0 {
		t.Fatalf("%d duplicate effects", n)
	}
	settled := sum.RunsByState["completed"] + sum.RunsByState["needs_review"]
	if settled != 16 || len(sum.RunsByState) > 2 {
		t.Fatalf("runs by state = %v; want all 16 completed or needs_review", sum.RunsByState)
	}
	if sum.Submissions != 32 || sum.DuplicateSubmissions != 16 {
		t.Errorf("%d form posts, %d answered as duplicates; want 32 and 16", sum.Submissions, sum.DuplicateSubmissions)
	}
	if len(sum.ReviewItems) == 0 {
		t.Error("no review item: the chat notifier's 422 should park a step")
	}
	if sum.ReviewReasons["permanent_error"] == 0 || sum.ReviewReasons["key_conflict"] != 1 {
		t.Errorf("review reasons = %v; want permanent_error and one key_conflict", sum.ReviewReasons)
	}
	// A retry after an unknown outcome reached a destination that had already applied the
	// effect, and the idempotency key kept it from applying it again.
	if sum.Engine.UnknownOutcomesRetried == 0 || sum.KeyReplays() == 0 {
		t.Errorf("unknown outcomes retried %d, key replays %d; want both > 0", sum.Engine.UnknownOutcomesRetried, sum.KeyReplays())
	}
	// The resubmitted form's steps came from the effect ledger.
	if sum.Engine.EffectsReused == 0 {
		t.Error("no effect was reused from the ledger across runs")
	}
	var faults int
	for _, d := range sum.Destinations {
		faults += d.FaultsInjected
	}
	if faults == 0 {
		t.Error("no fault was injected")
	}

	var text bytes.Buffer
	if err := sum.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DUPLICATE EFFECTS", "Review items", "onceflow runs list --db sqlite:///", "onceflow runs show "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(progress.String(), "all 16 runs settled") {
		t.Errorf("progress:\n%s", progress.String())
	}

	b, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"destinations", "runs_by_state", "review_reasons", "invariants_ok", "db"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON summary lacks %q: %s", k, b)
		}
	}
}

// A scenario that cannot finish in time is an invariant failure, not a success.
func TestRunReportsDeadlineAsFailure(t *testing.T) {
	t.Parallel()
	sum, err := demo.Run(context.Background(), demo.Config{
		DBPath:   filepath.Join(t.TempDir(), "demo.db"),
		Runs:     4,
		Deadline: time.Nanosecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.InvariantsOK {
		t.Fatal("invariants OK although the deadline passed before anything ran")
	}
	if f := strings.Join(sum.Failures(), "; "); !strings.Contains(f, "deadline") {
		t.Fatalf("failures = %q; want the deadline named", f)
	}
}

func TestRunNeedsDBPath(t *testing.T) {
	t.Parallel()
	if _, err := demo.Run(context.Background(), demo.Config{}); err == nil {
		t.Fatal("Run without DBPath succeeded")
	}
}
