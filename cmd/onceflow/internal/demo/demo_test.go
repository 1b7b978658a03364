package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/cmd/onceflow/internal/demo"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

func TestMain(m *testing.M) {
	if os.Getenv("ONCEFLOW_TEST_CHILD") == "queues-worker" {
		os.Exit(queuesWorker())
	}
	goleak.VerifyTestMain(testsvc.Report(m))
}

// The whole scenario, small: the example workflows through the API and the webhook
// endpoint against misbehaving services, with every effect carried out once.
func TestRunPerformsEveryEffectOnce(t *testing.T) {
	t.Parallel()
	var progress bytes.Buffer
	sum, err := demo.Run(context.Background(), demo.Config{
		Store:    openStore(t),
		DBURL:    "sqlite:///demo.db",
		Forms:    8,
		Orders:   6,
		Workers:  4,
		Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.InvariantsOK {
		t.Fatalf("invariants failed: %v", sum.Failures())
	}
	if inv := sum.Invoices; inv == nil || !inv.Restarted || inv.Runs != inv.Customers || len(inv.PerCustomerPeriod) != 1 || inv.PerCustomerPeriod["1"] != inv.Customers {
		t.Fatalf("monthly invoices: %+v; want every customer invoiced once for the period, across a restart", inv)
	}
	if len(sum.Destinations) != 5 {
		t.Fatalf("%d destinations, want crm, whatsapp, stock, invoicing and smtp", len(sum.Destinations))
	}
	faults := 0
	for _, d := range sum.Destinations {
		if d.DuplicateEffects != 0 {
			t.Errorf("%s: %d duplicate effects", d.Name, d.DuplicateEffects)
		}
		if d.EffectsApplied == 0 {
			t.Errorf("%s applied nothing", d.Name)
		}
		faults += d.FaultsInjected
	}
	if faults == 0 {
		t.Error("no fault was injected")
	}

	// 8 forms, 6 orders' events and one second event about a payment already handled.
	if sum.Runs != 15 || sum.RunsByState["completed"]+sum.RunsByState["needs_review"] != 15 || len(sum.RunsByState) > 2 {
		t.Fatalf("%d runs by state %v; want 15, all completed or needs_review", sum.Runs, sum.RunsByState)
	}
	if f := sum.Forms; f.Created != 8 || f.Replayed != 8 || f.KeyReused != 1 {
		t.Errorf("forms = %+v; want 8 created, 8 replayed, 1 refused 422", f)
	}
	if p := sum.Payments; p.Started != 7 || p.Repeated < 6 || p.SecondEvents != 1 || p.CancelledBeforehand != 1 {
		t.Errorf("payments = %+v", p)
	}
	if sum.ReviewReasons["permanent_error"] == 0 {
		t.Errorf("review reasons = %v; want WhatsApp's 422 as permanent_error", sum.ReviewReasons)
	}
	if len(sum.RefusedTransitions) == 0 || sum.OrdersByState["cancelled"] != 1 || sum.OrdersByState["paid"] != 5 {
		t.Errorf("refused transitions %v, orders %v; want the cancelled order's mark_paid skipped", sum.RefusedTransitions, sum.OrdersByState)
	}
	if sum.Ledger.Reused == 0 || sum.Ledger.ReusedByStep["payment-succeeded/mark_paid"] != 1 {
		t.Errorf("ledger = %+v; want the second event's steps completed from the ledger", sum.Ledger)
	}
	// Retries reached the services with keys they had seen, and the keys kept them from
	// acting twice.
	if sum.RepeatedKeys() == 0 || sum.Engine.UnknownOutcomesRetried == 0 {
		t.Errorf("repeated keys %d, unknown outcomes retried %d; want both > 0", sum.RepeatedKeys(), sum.Engine.UnknownOutcomesRetried)
	}

	var text bytes.Buffer
	if err := sum.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DUPLICATE EFFECTS", "smtp (no dedup)", "Review items", "Effect ledger: ", "order:5004",
		"onceflow runs list --db sqlite:///", "onceflow runs show ", "curl -H 'Authorization: Bearer adm_", "40× shorter",
		fmt.Sprintf("%d runs (15 from forms and payments, %d invoice runs)", 15+sum.Invoices.Runs, sum.Invoices.Runs)} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(progress.String(), "all 15 form and payment runs completed or waiting for review") {
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
	for _, k := range []string{"destinations", "runs_by_workflow", "runs_by_state", "review_items", "ledger", "orders_by_state", "invariants_ok", "db_url", "next"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON summary lacks %q: %s", k, b)
		}
	}
}

// A scenario that cannot finish in time is an invariant failure, not a success.
func TestRunReportsDeadlineAsFailure(t *testing.T) {
	t.Parallel()
	sum, err := demo.Run(context.Background(), demo.Config{
		Store:    openStore(t),
		DBURL:    "sqlite:///demo.db",
		Forms:    4,
		Orders:   2,
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

func TestRunNeedsStore(t *testing.T) {
	t.Parallel()
	if _, err := demo.Run(context.Background(), demo.Config{}); err == nil {
		t.Fatal("Run without a store succeeded")
	}
}

// openStore opens a fresh SQLite file for one scenario.
func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "demo.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
