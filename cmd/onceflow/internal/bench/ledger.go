package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/store"
)

// LedgerReport is what the ledger scenario measured: R runs of a one-step chain on a
// database whose ledger already holds M completed effects, against the same on an empty
// database. The common fields are those of the loaded database.
type LedgerReport struct {
	Result
	Starters      int   `json:"starters"`
	LedgerEffects int64 `json:"ledger_effects"`
	// LoadSeconds is how long the bulk load of the effects took.
	LoadSeconds         float64 `json:"load_seconds"`
	EmptyStepsPerSecond float64 `json:"empty_steps_per_second"`
	// RatioToEmpty is StepsPerSecond over EmptyStepsPerSecond: 1 when the ledger's size
	// costs nothing.
	RatioToEmpty float64 `json:"ratio_to_empty"`
}

// Note implements Report.
func (r *LedgerReport) Note() string {
	return fmt.Sprintf("%d effects in the ledger: %.2f× the %.0f steps/s of an empty one", r.LedgerEffects, r.RatioToEmpty, r.EmptyStepsPerSecond)
}

const ledgerWorkflow = "bench-ledger"

func runLedger(ctx context.Context, cfg Config) (Report, error) {
	rep := &LedgerReport{Result: cfg.result("ledger"),
		Starters: cfg.Starters, LedgerEffects: int64(cfg.LedgerEffects)}
	var empty Result
	err := withDatabase(ctx, cfg.Target, "ledger-empty", func(d *database) error {
		m, err := measureChain(ctx, d, cfg.progress("ledger", d),
			chainParams{phase: "empty ledger:", workflow: ledgerWorkflow, runs: cfg.Runs, k: 1, starters: cfg.Starters, workers: cfg.Workers})
		if err != nil {
			return err
		}
		m.report(&empty, cfg.Runs, 1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.EmptyStepsPerSecond = empty.StepsPerSecond
	for _, f := range empty.Failures {
		rep.fail("empty database: %s", f)
	}
	err = withDatabase(ctx, cfg.Target, "ledger", func(d *database) error {
		prog := cfg.progress("ledger", d)
		var rows atomic.Int64
		t0 := time.Now()
		stop := prog.phase("load", counted(rows.Load, int64(cfg.LedgerEffects), "effects", t0))
		err := d.load(ctx, func(b bulkLoader) error { return b.effects(ctx, cfg.LedgerEffects, t0, &rows) })
		stop()
		if err != nil {
			return err
		}
		rep.LoadSeconds = secs(time.Since(t0))
		if err := d.open(ctx); err != nil {
			return err
		}
		if cfg.LedgerEffects > 0 {
			key := fmt.Sprintf("%s%09d", pastKeyPrefix, cfg.LedgerEffects)
			if e, err := d.st.EffectGetByKey(ctx, key); err != nil {
				return fmt.Errorf("the store cannot read the loaded effect %s: %w", key, err)
			} else if e.State != store.EffectCompleted {
				rep.fail("the loaded effect %s is %s, not completed", key, e.State)
			}
		}
		m, err := measureChain(ctx, d, prog, chainParams{phase: fmt.Sprintf("%d effects:", cfg.LedgerEffects),
			workflow: ledgerWorkflow, runs: cfg.Runs, k: 1, starters: cfg.Starters, workers: cfg.Workers})
		if err != nil {
			return err
		}
		m.report(&rep.Result, cfg.Runs, 1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rep.EmptyStepsPerSecond > 0 {
		rep.RatioToEmpty = round(rep.StepsPerSecond/rep.EmptyStepsPerSecond, 3)
	}
	return rep, nil
}
