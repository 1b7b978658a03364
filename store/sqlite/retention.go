package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

var _ store.RetentionStore = (*Store)(nil)

// unfinishedStep is true for a step u that has not finished: anything but completed,
// failed, skipped and cancelled (a state added later counts as unfinished, so it keeps).
const unfinishedStep = `u.state NOT IN ('completed', 'failed', 'skipped', 'cancelled')`

// purgeableRuns selects the IDs of the runs a purge deletes: finished, with every step
// finished, last changed before the cutoff (the first parameter).
const purgeableRuns = `SELECT r.id FROM runs r
	WHERE r.state IN ('completed', 'failed', 'cancelled') AND r.updated_at < ?
	  AND NOT EXISTS (SELECT 1 FROM steps u WHERE u.run_id = r.id AND ` + unfinishedStep + `)`

// purgeableEffects selects the keys of the ledger rows a purge deletes: completed, with a
// retention that ended at or before now (the first parameter), and referred to by no run
// that is unfinished: neither the run that completed the key nor any run with a step
// under that key.
const purgeableEffects = `SELECT e.effect_key FROM effects e
	WHERE e.state = 'completed' AND e.retain_until > 0 AND e.retain_until <= ?
	  AND NOT EXISTS (SELECT 1 FROM steps u WHERE u.run_id = e.run_id AND ` + unfinishedStep + `)
	  AND NOT EXISTS (SELECT 1 FROM steps s JOIN steps u ON u.run_id = s.run_id
	                  WHERE s.effect_key = e.effect_key AND ` + unfinishedStep + `)`

// RetentionPurge implements store.RetentionStore. All writers of this file serialize on
// its write lock, so concurrent purges, in this process or others, take turns batch by
// batch and each row is deleted by one of them.
func (s *Store) RetentionPurge(ctx context.Context, p store.RetentionPurgeParams) (*store.PurgeReport, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if p.DryRun {
		return s.purgeDryRun(ctx, p)
	}
	defer s.purges.Begin()()
	return store.PurgeBatches(p, func(size, n int) (*store.PurgeReport, error) {
		var batch *store.PurgeReport
		err := s.tx(ctx, "retention purge", func(tx *sql.Tx) error {
			var err error
			batch, err = purgeBatch(ctx, tx, p, size, n)
			return err
		})
		return batch, err
	}, func(total *store.PurgeReport) error {
		return s.tx(ctx, "retention purge", func(tx *sql.Tx) error {
			return insertEvent(ctx, tx, purgeEvent(p, total, 0))
		})
	})
}

// purgeBatch deletes up to size runs (with their steps, attempts and events) and up to
// size ledger rows, and appends the event that records it when it deleted anything.
func purgeBatch(ctx context.Context, tx *sql.Tx, p store.RetentionPurgeParams, size, n int) (*store.PurgeReport, error) {
	r := &store.PurgeReport{}
	if !p.RunsBefore.IsZero() {
		ids, err := selectIDs[int64](ctx, tx, purgeableRuns+` ORDER BY r.updated_at, r.id LIMIT ?`, ts(p.RunsBefore), size)
		if err != nil {
			return nil, err
		}
		if len(ids) > 0 {
			list, err := json.Marshal(ids)
			if err != nil {
				return nil, err
			}
			for _, d := range []struct {
				sql string
				c   *store.PurgeCount
			}{
				{`DELETE FROM events WHERE run_id IN (SELECT value FROM json_each(?)) RETURNING at`, &r.Events},
				{`DELETE FROM attempts WHERE run_id IN (SELECT value FROM json_each(?)) RETURNING started_at`, &r.Attempts},
				{`DELETE FROM steps WHERE run_id IN (SELECT value FROM json_each(?)) RETURNING updated_at`, &r.Steps},
				{`DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?)) RETURNING updated_at`, &r.Runs},
			} {
				if err := deleteCounting(ctx, tx, d.sql, string(list), d.c); err != nil {
					return nil, err
				}
			}
		}
	}
	keys, err := selectIDs[string](ctx, tx, purgeableEffects+` ORDER BY e.retain_until, e.effect_key LIMIT ?`, ts(p.Now), size)
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		list, err := json.Marshal(keys)
		if err != nil {
			return nil, err
		}
		if err := deleteCounting(ctx, tx, `DELETE FROM effects WHERE effect_key IN (SELECT value FROM json_each(?)) RETURNING completed_at`, string(list), &r.Effects); err != nil {
			return nil, err
		}
	}
	if r.Empty() {
		return r, nil
	}
	return r, insertEvent(ctx, tx, purgeEvent(p, r, n))
}

// selectIDs runs a query returning one column.
func selectIDs[T any](ctx context.Context, tx *sql.Tx, q string, args ...any) ([]T, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// deleteCounting runs a DELETE … RETURNING of one timestamp and counts what it deleted.
func deleteCounting(ctx context.Context, tx *sql.Tx, q, list string, c *store.PurgeCount) error {
	rows, err := tx.QueryContext(ctx, q, list)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var at int64
		if err := rows.Scan(&at); err != nil {
			return err
		}
		c.Observe(fromTS(at))
	}
	return rows.Err()
}

// purgeDryRun counts, in one read transaction (one snapshot), what a purge would delete.
func (s *Store) purgeDryRun(ctx context.Context, p store.RetentionPurgeParams) (*store.PurgeReport, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: retention purge (dry run): %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	r := &store.PurgeReport{DryRun: true}
	type count struct {
		sql string
		arg int64
		c   *store.PurgeCount
	}
	counts := []count{{`SELECT count(*), min(completed_at), max(completed_at) FROM effects WHERE effect_key IN (` + purgeableEffects + `)`, ts(p.Now), &r.Effects}}
	if !p.RunsBefore.IsZero() {
		cut := ts(p.RunsBefore)
		counts = append(counts,
			count{`SELECT count(*), min(updated_at), max(updated_at) FROM runs WHERE id IN (` + purgeableRuns + `)`, cut, &r.Runs},
			count{`SELECT count(*), min(updated_at), max(updated_at) FROM steps WHERE run_id IN (` + purgeableRuns + `)`, cut, &r.Steps},
			count{`SELECT count(*), min(started_at), max(started_at) FROM attempts WHERE run_id IN (` + purgeableRuns + `)`, cut, &r.Attempts},
			count{`SELECT count(*), min(at), max(at) FROM events WHERE run_id IN (` + purgeableRuns + `)`, cut, &r.Events},
		)
	}
	for _, c := range counts {
		var n int
		var oldest, newest sql.NullInt64
		if err := tx.QueryRowContext(ctx, c.sql, c.arg).Scan(&n, &oldest, &newest); err != nil {
			return nil, fmt.Errorf("sqlite: retention purge (dry run): %w", err)
		}
		if n > 0 {
			*c.c = store.PurgeCount{Count: n, Oldest: fromTS(oldest.Int64), Newest: fromTS(newest.Int64)}
		}
	}
	return r, nil
}

// purgeEvent is the audit record of batch number n of a purge (0: a purge that found
// nothing to delete).
func purgeEvent(p store.RetentionPurgeParams, r *store.PurgeReport, n int) *store.Event {
	actor := p.Actor
	if actor == "" {
		actor = store.ActorRetention
	}
	d := map[string]any{
		"now": p.Now, "batch": n,
		"runs": r.Runs.Count, "steps": r.Steps.Count, "attempts": r.Attempts.Count, "events": r.Events.Count, "effects": r.Effects.Count,
	}
	if !p.RunsBefore.IsZero() {
		d["runs_before"] = p.RunsBefore
	}
	return &store.Event{At: p.Now, Type: store.EventRetentionPurged, Actor: actor, Detail: detail(d)}
}

var _ store.PurgeCounter = (*Store)(nil)

// Purges implements store.PurgeCounter: it changes whenever a purge through this store
// begins or ends.
func (s *Store) Purges() uint64 { return s.purges.Purges() }
