package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// logLedgerCompletions installs, in schema, triggers that count each time an effect key's
// ledger row becomes completed — in the row of the step that holds the key, or in effects
// for a key held before the ledger moved into the steps (a row moved into effects from a
// step, completed already, is no new completion); ledgerCompletions reads the counts.
func logLedgerCompletions(t testing.TB, schema string) {
	t.Helper()
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	_, err := admin(t).Exec(context.Background(), `
		CREATE TABLE `+q("test_ledger_completions")+` (effect_key text NOT NULL, step_id bigint NOT NULL);
		CREATE FUNCTION `+q("test_log_completion")+`() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO `+q("test_ledger_completions")+` VALUES (NEW.effect_key, NEW.step_id);
			RETURN NEW;
		END $$;
		CREATE FUNCTION `+q("test_log_step_completion")+`() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO `+q("test_ledger_completions")+` VALUES (NEW.effect_key, NEW.id);
			RETURN NEW;
		END $$;
		CREATE TRIGGER test_completed_on_update AFTER UPDATE ON `+q("effects")+` FOR EACH ROW
			WHEN (OLD.state <> 'completed' AND NEW.state = 'completed') EXECUTE FUNCTION `+q("test_log_completion")+`();
		CREATE TRIGGER test_completed_in_step AFTER UPDATE ON `+q("steps")+` FOR EACH ROW
			WHEN (OLD.key_state <> 'completed' AND NEW.key_state = 'completed' AND NEW.key_slot = 0)
			EXECUTE FUNCTION `+q("test_log_step_completion")+`();`)
	if err != nil {
		t.Fatalf("install the ledger completion log: %v", err)
	}
}

// ledgerCompletions returns how many times each effect key's ledger row became completed.
func ledgerCompletions(t testing.TB, schema string) map[string]int {
	t.Helper()
	rows, err := admin(t).Query(context.Background(), `SELECT effect_key, count(*) FROM `+
		pgx.Identifier{schema, "test_ledger_completions"}.Sanitize()+` GROUP BY effect_key`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	var key string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&key, &n}, func() error { out[key] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// terminateBackends kills, through conn, every connection opened with application_name app
// and returns how many it killed.
func terminateBackends(t testing.TB, conn *pgx.Conn, app string) int {
	t.Helper()
	var n int
	err := conn.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n)
	if err != nil {
		t.Fatalf("terminate backends of %s: %v", app, err)
	}
	return n
}

// The database drops every connection of a busy worker, three times, while many steps are
// in flight: transactions that lost their connection are retried, records whose commit
// failed are retried by the engine and refused if they had committed, leases that lapsed
// meanwhile are reaped, and every run still completes, with each effect acted on at most
// once per attempt and completed once in the ledger.
func TestConnectionCut(t *testing.T) {
	t.Parallel()
	const runs = 100
	schema := newSchema(t)
	app := "onceflow_cut_" + schema[len(schema)-8:]
	s := openStore(t, schema, "application_name="+app, "pool_max_conns=8")
	logLedgerCompletions(t, schema)

	var mu sync.Mutex
	acted := map[string]int{} // effect key → calls of the step function
	var calls atomic.Int64
	progress := make(chan struct{}, 1)
	act := func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
		mu.Lock()
		acted[sc.EffectKey]++
		mu.Unlock()
		calls.Add(1)
		select {
		case progress <- struct{}{}:
		default:
		}
		// The destination's latency, so that many steps are in flight at once.
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{"key": sc.EffectKey}, nil
	}
	retry := onceflow.RetryPolicy{MaxAttempts: 50, Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	warnings := &countingHandler{counts: map[string]int{}}
	c, err := onceflow.New(onceflow.Config{Store: s, WorkerID: "cut-worker", Workers: 16, LeaseFor: 2 * time.Second,
		PollInterval: 50 * time.Millisecond, ReapInterval: 200 * time.Millisecond, EffectWait: 50 * time.Millisecond,
		Logger: slog.New(warnings)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "cut", Steps: []onceflow.Step{
		{ID: "a", Do: act, Retry: retry},
		{ID: "b", Needs: []string{"a"}, Do: act, Retry: retry},
		{ID: "c", Needs: []string{"a"}, Do: act, Retry: retry},
		{ID: "d", Needs: []string{"b", "c"}, Do: act, Retry: retry},
	}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	defer stop()

	ids := make([]int64, runs)
	for i := range runs {
		r, err := c.Start(ctx, "cut", fmt.Sprintf("run-%03d", i), map[string]any{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}

	// Cut when the step functions have been called 40, 140 and 240 times: steps are then
	// being claimed, acted on and recorded.
	var cuts, killed int
	killer := admin(t)
	for _, at := range []int64{40, 140, 240} {
		for calls.Load() < at {
			select {
			case <-progress:
			case <-time.After(30 * time.Second):
				t.Fatalf("stuck at %d step calls waiting for %d", calls.Load(), at)
			}
		}
		// Right after a cut the worker may not have reconnected yet: a cut counts only
		// when it killed a connection, or the test would prove nothing.
		n, deadline := 0, time.After(30*time.Second)
		for n = terminateBackends(t, killer, app); n == 0; n = terminateBackends(t, killer, app) {
			select {
			case <-deadline:
				t.Fatalf("cut %d (at %d step calls) found no connection of %s to kill within 30 s", cuts+1, at, app)
			case <-time.After(10 * time.Millisecond):
			}
		}
		killed += n
		cuts++
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		done, err := s.RunList(t.Context(), store.RunListParams{State: store.StateCompleted, Limit: runs})
		if err != nil {
			t.Fatal(err)
		}
		if len(done) == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs completed after 60 s", len(done), runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()

	attempts := map[string]int{}
	for _, id := range ids {
		atts, err := s.AttemptListByRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range atts {
			attempts[a.EffectKey]++
		}
		steps, err := s.StepListByRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			if st.State != store.StateCompleted {
				t.Errorf("run %d step %s is %s, want completed", id, st.Name, st.State)
			}
		}
	}
	completions := ledgerCompletions(t, schema)
	var totalActed, totalAttempts, duplicates int
	for key, n := range acted {
		totalActed += n
		if n > attempts[key] {
			t.Errorf("effect %s acted on %d times in %d attempts", key, n, attempts[key])
		}
	}
	for key := range attempts {
		totalAttempts += attempts[key]
		if completions[key] != 1 {
			t.Errorf("effect %s completed %d times in the ledger, want 1", key, completions[key])
		}
		if completions[key] > 1 {
			duplicates++
		}
	}
	if cuts != 3 || killed < cuts {
		t.Errorf("%d cuts killed %d connections, want 3 cuts killing at least one each", cuts, killed)
	}
	if len(attempts) != 4*runs || len(completions) != 4*runs {
		t.Errorf("%d effect keys attempted, %d completed, want %d", len(attempts), len(completions), 4*runs)
	}
	t.Logf("runs %d, cuts %d, connections killed %d, effects %d, attempts %d, step calls %d, duplicate ledger completions %d; engine warnings %v",
		runs, cuts, killed, len(completions), totalAttempts, totalActed, duplicates, warnings.snapshot())
}

// countingHandler is a slog.Handler that counts warnings and errors by message.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *countingHandler) WithGroup(string) slog.Handler                { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Message]++
	h.mu.Unlock()
	return nil
}

func (h *countingHandler) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.counts)
}
