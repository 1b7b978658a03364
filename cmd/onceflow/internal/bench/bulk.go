package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"
	"time"
)

// bulkBatch is how many rows a bulk load writes per statement and transaction.
const bulkBatch = 50_000

// Names of what the bulk loads write.
const (
	// pastWorkflow and pastStep name the steps that completed the loaded effects, whose
	// keys are pastKeyPrefix followed by a nine-digit number: the shape of the default
	// effect key template {workflow}.{step}:{run.key}.
	pastWorkflow  = "bench-ledger-past"
	pastStep      = "call"
	pastKeyPrefix = pastWorkflow + "." + pastStep + ":past-"
	// backlogKeyPrefix starts the run keys of the loaded backlog.
	backlogKeyPrefix = "backlog-"
)

// emptyInput is the input of every loaded run, and emptyInputHash its hash as Start
// computes it.
var (
	emptyInput     = []byte("{}")
	emptyInputHash = func() string { s := sha256.Sum256(emptyInput); return hex.EncodeToString(s[:]) }()
)

// bulkLoader writes rows straight into the tables a store's migrations created, with SQL
// of the backend's own dialect, many thousand rows per statement. Loaded rows are what
// the store itself would have written, minus the work of getting there.
type bulkLoader interface {
	// effects inserts n completed ledger rows with distinct keys (pastKeyPrefix…), as if
	// steps of other runs had completed them; rows counts the rows written so far.
	effects(ctx context.Context, n int, now time.Time, rows *atomic.Int64) error
	// backlog inserts n pending runs of workflow with input {}, each with one step
	// called step that is due at once, and their run.created events.
	backlog(ctx context.Context, workflow, step string, n int, now time.Time, rows *atomic.Int64) error
	// finish leaves the database as a long-lived one would be: its log checkpointed,
	// its statistics up to date.
	finish(ctx context.Context) error
	close() error
}

// bulk returns the loader of d's backend. The store should be closed while it loads.
func (d *database) bulk(ctx context.Context) (bulkLoader, error) {
	if d.kind == "postgres" {
		return openPostgresBulk(ctx, d.url, d.schema)
	}
	return openSQLiteBulk(d.path)
}

// load closes the store and runs fn on d's bulk loader; the caller opens the store again.
func (d *database) load(ctx context.Context, fn func(b bulkLoader) error) error {
	if err := d.closeStore(); err != nil {
		return err
	}
	b, err := d.bulk(ctx)
	if err != nil {
		return err
	}
	err = fn(b)
	if err == nil {
		err = b.finish(ctx)
	}
	if cerr := b.close(); err == nil {
		err = cerr
	}
	return err
}

// batches calls fn for [lo, hi] ranges of 1…n, at most bulkBatch long.
func batches(ctx context.Context, n int, fn func(lo, hi int) error) error {
	for lo := 1; lo <= n; lo += bulkBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(lo, min(n, lo+bulkBatch-1)); err != nil {
			return err
		}
	}
	return nil
}
