package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// refuseAtCommit adds to schema a constraint trigger, deferred to COMMIT, that fails the
// commit of every transaction that inserted a run whose key begins with "refused-" or
// completed a step named "refused": the statements succeed, and COMMIT, sent in the same
// round trip as the last of them, answers with an error.
func refuseAtCommit(t *testing.T, schema string) {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	fn := func(name, cond string) string {
		return `CREATE FUNCTION ` + s + `.` + name + `() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF ` + cond + ` THEN
				RAISE EXCEPTION 'refused at commit' USING ERRCODE = 'check_violation';
			END IF;
			RETURN NULL;
		END $$`
	}
	for _, q := range []string{
		fn("refuse_run", `NEW.run_key LIKE 'refused-%'`),
		fn("refuse_step", `NEW.name = 'refused' AND NEW.state = 'completed'`),
		`CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON ` + s + `.runs
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + s + `.refuse_run()`,
		`CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER UPDATE ON ` + s + `.steps
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ` + s + `.refuse_step()`,
	} {
		if _, err := admin(t).Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// wantRefusedAtCommit checks that err is the failure of a COMMIT: an error that says the
// outcome is unknown and carries the database's refusal.
func wantRefusedAtCommit(t *testing.T, what string, err error) {
	t.Helper()
	var pe *pgconn.PgError
	switch {
	case err == nil:
		t.Errorf("%s: no error, although its COMMIT failed", what)
	case !errors.As(err, &pe) || pe.Code != "23514":
		t.Errorf("%s: %v, want the check_violation COMMIT answered", what, err)
	case !strings.Contains(err.Error(), "may or may not have committed"):
		t.Errorf("%s: %v, want an error that says the outcome is unknown", what, err)
	}
}

// A COMMIT sent in the same round trip as a transaction's last statements fails at the
// server (a deferred constraint) after every statement succeeded. The caller gets an error
// saying the outcome is unknown, never a success: a start whose COMMIT failed is not
// acknowledged, through the store or the engine, and a record whose COMMIT failed leaves
// the step as it was.
func TestCommitRefusedAfterItsStatements(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	refuseAtCommit(t, schema)
	ctx := t.Context()
	params := func(key string, steps ...string) store.RunInsertParams {
		p := store.RunInsertParams{Workflow: "orders", RunKey: key, Entity: "order:" + key, Input: json.RawMessage(`{}`), InputHash: "h", Now: base}
		for _, st := range steps {
			p.Steps = append(p.Steps, store.StepInsert{Name: st})
		}
		return p
	}

	// A batch of starts, one of them refused at COMMIT: none of them is acknowledged.
	res, err := s.RunInsertMany(ctx, []store.RunInsertParams{params("ok-1", "a"), params("refused-1", "a")})
	wantRefusedAtCommit(t, "RunInsertMany", err)
	if res != nil {
		var ids []int64
		for _, r := range res {
			if r.Run != nil {
				ids = append(ids, r.Run.ID)
			}
		}
		t.Errorf("RunInsertMany acknowledged runs %v of a batch whose COMMIT failed, want no results", ids)
	}
	for _, key := range []string{"ok-1", "refused-1"} {
		if r, err := s.RunGetByKey(ctx, "orders", key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("run %s after its COMMIT failed: %+v, %v; want none", key, r, err)
		}
	}

	// Through the engine: Start fails and nothing is stored.
	c, err := onceflow.New(onceflow.Config{Store: s, WorkerID: "refused"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "orders", Steps: []onceflow.Step{{ID: "a", Do: func(context.Context, *onceflow.StepContext) (any, error) {
		return nil, nil
	}}}}); err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(ctx, "orders", "refused-2", map[string]any{})
	wantRefusedAtCommit(t, "Start", err)
	if run != nil {
		t.Errorf("Start acknowledged run %d (%s) although its COMMIT failed, want none", run.ID, run.RunKey)
	}
	if r, err := s.RunGetByKey(ctx, "orders", "refused-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run refused-2 after its COMMIT failed: %+v, %v; want none", r, err)
	}
	if _, err := c.Start(ctx, "orders", "ok-2", map[string]any{}); err != nil {
		t.Fatalf("a start the trigger lets through: %v", err)
	}

	// A record whose COMMIT fails: the step stays processing under its lease.
	stored := insertRun(t, s, "k1")
	if _, err := admin(t).Exec(ctx, `UPDATE `+pgx.Identifier{schema}.Sanitize()+`.steps SET name = 'refused' WHERE run_id = $1`, stored.ID); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.StepClaim(ctx, store.StepClaimParams{Owner: "w1", Now: base, LeaseFor: time.Minute, Limit: 10, Workflows: []string{"orders"},
		Prepare: func(c *store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: "key:" + c.Run.RunKey}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var cs *store.ClaimedStep
	for _, x := range claimed.Claimed {
		if x.Run.ID == stored.ID {
			cs = x
		}
	}
	if cs == nil {
		t.Fatalf("claimed %d steps, none of run k1", len(claimed.Claimed))
	}
	errs, err := s.StepRecord(ctx, []store.StepRecordParams{{StepID: cs.Step.ID, Owner: "w1", Attempt: cs.Step.Attempt, Now: base.Add(time.Second),
		Outcome: store.OutcomeSuccess, Output: json.RawMessage(`{"id": 1}`), NextState: store.StateCompleted}})
	wantRefusedAtCommit(t, "StepRecord", err)
	if errs != nil {
		t.Errorf("StepRecord answered entry results %v although its COMMIT failed, want none", errs)
	}
	steps, err := s.StepListByRun(ctx, stored.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0].State != store.StateProcessing || steps[0].LeaseOwner != "w1" {
		t.Errorf("the step after its record's COMMIT failed: %+v, want processing by w1", steps)
	}
	if e, err := s.EffectGetByKey(ctx, "key:k1"); err != nil || e.State != store.EffectInFlight {
		t.Errorf("the ledger row after the record's COMMIT failed: %+v, %v; want in flight", e, err)
	}
}
