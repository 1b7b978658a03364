package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

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
	                  WHERE s.effect_key = e.effect_key AND s.effect_key <> '' AND ` + unfinishedStep + `)`

// purgeableHeldKeys selects the steps whose key a purge frees, by the same rule: a key
// held, completed, in the row of a step (store/sqlite/ledger.go) is released in place.
const purgeableHeldKeys = `SELECT h.id FROM steps h INDEXED BY steps_key_retain
	WHERE h.key_retain_until > 0 AND h.key_retain_until <= ? AND h.key_slot = 0 AND h.key_state = 'completed'
	  AND NOT EXISTS (SELECT 1 FROM steps u WHERE u.run_id = h.run_id AND ` + unfinishedStep + `)
	  AND NOT EXISTS (SELECT 1 FROM steps s JOIN steps u ON u.run_id = s.run_id
	                  WHERE s.effect_key = h.effect_key AND s.effect_key <> '' AND ` + unfinishedStep + `)`

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
		err := s.write(ctx, "retention purge", func(w *writeTx) error {
			var err error
			batch, err = purgeBatch(ctx, w, p, size, n)
			return err
		})
		return batch, err
	}, func(total *store.PurgeReport) error {
		return s.write(ctx, "retention purge", func(w *writeTx) error {
			w.event(purgeEvent(p, total, 0))
			return nil
		})
	})
}

// purgeBatch deletes up to size runs (with their steps, attempts and events) and up to
// size ledger rows, and appends the event that records it when it deleted anything.
func purgeBatch(ctx context.Context, w *writeTx, p store.RetentionPurgeParams, size, n int) (*store.PurgeReport, error) {
	tx := w.tx
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
			if err := purgeRuns(ctx, tx, string(list), r); err != nil {
				return nil, err
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
	if left := size - len(keys); left > 0 {
		held, err := selectIDs[int64](ctx, tx, purgeableHeldKeys+` ORDER BY h.key_retain_until, h.id LIMIT ?`, ts(p.Now), left)
		if err != nil {
			return nil, err
		}
		if len(held) > 0 {
			list, err := json.Marshal(held)
			if err != nil {
				return nil, err
			}
			if err := deleteCounting(ctx, tx, `UPDATE steps SET key_slot = id, key_state = '', key_retain_until = 0
				WHERE id IN (SELECT value FROM json_each(?)) RETURNING key_completed_at`, string(list), &r.Effects); err != nil {
				return nil, err
			}
		}
	}
	if r.Empty() {
		return r, nil
	}
	w.event(purgeEvent(p, r, n))
	return r, nil
}

// purgeRuns deletes the runs of the JSON array list with their steps, attempts and
// events, and counts them in r: the stored events and the events their runs, steps and
// attempts derive (see store/derive.go), and the attempts that ended and those in flight.
func purgeRuns(ctx context.Context, tx dbtx, list string, r *store.PurgeReport) error {
	// The keys their steps hold stay in the ledger, in effects, as they are: a completed
	// key still answers done.
	if _, err := tx.ExecContext(ctx, `INSERT INTO effects (`+effectColumns+`)
		SELECT effect_key, key_state, fingerprint, CASE WHEN key_state = 'completed' THEN coalesce(key_result, output) END, run_id, id, workflow, name,
			key_taken_at, key_completed_at, key_retain_until
		FROM steps WHERE run_id IN (SELECT value FROM json_each(?)) AND key_slot = 0 AND effect_key <> ''`, list); err != nil {
		return err
	}
	if err := deleteCounting(ctx, tx, `DELETE FROM events WHERE run_id IN (SELECT value FROM json_each(?)) RETURNING at`, list, &r.Events); err != nil {
		return err
	}
	for _, d := range []struct {
		sql string
		// The counts of each deleted row's times: attempts, then events.
		counts []*store.PurgeCount
	}{
		{`DELETE FROM attempts WHERE step_id IN (SELECT id FROM steps WHERE run_id IN (SELECT value FROM json_each(?)))
			RETURNING started_at, NULL, CASE WHEN claim_event_id IS NOT NULL THEN started_at END, CASE WHEN end_derived = 1 THEN ended_at END,
				CASE WHEN claim_run_event_id IS NOT NULL THEN started_at END, CASE WHEN end_run_event_id IS NOT NULL THEN ended_at END`,
			[]*store.PurgeCount{&r.Attempts, &r.Steps, &r.Events, &r.Events, &r.Events, &r.Events}},
		{`DELETE FROM steps WHERE run_id IN (SELECT value FROM json_each(?))
			RETURNING CASE WHEN claim_event_id > 0 THEN claimed_at END, updated_at, CASE WHEN claim_event_id > 0 THEN claimed_at END,
				CASE WHEN claim_event_id > 0 AND claim_run_event_id IS NOT NULL THEN claimed_at END, NULL, NULL`,
			[]*store.PurgeCount{&r.Attempts, &r.Steps, &r.Events, &r.Events, &r.Events, &r.Events}},
		{`DELETE FROM runs WHERE id IN (SELECT value FROM json_each(?))
			RETURNING NULL, NULL, CASE WHEN created_event_id IS NOT NULL THEN created_at END, NULL, NULL, NULL, updated_at`,
			[]*store.PurgeCount{&r.Attempts, &r.Steps, &r.Events, &r.Events, &r.Events, &r.Events, &r.Runs}},
	} {
		if err := deleteCountingEach(ctx, tx, d.sql, list, d.counts); err != nil {
			return err
		}
	}
	return nil
}

// deleteCountingEach runs a DELETE … RETURNING of nullable times and counts each non-NULL
// one in the count of its column.
func deleteCountingEach(ctx context.Context, tx dbtx, q, list string, counts []*store.PurgeCount) error {
	rows, err := tx.QueryContext(ctx, q, list)
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]sql.NullInt64, len(counts))
	dest := make([]any, len(counts))
	for i := range vals {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		for i, v := range vals {
			if v.Valid {
				counts[i].Observe(fromTS(v.Int64))
			}
		}
	}
	return rows.Err()
}

// selectIDs runs a query returning one column.
func selectIDs[T any](ctx context.Context, tx dbtx, q string, args ...any) ([]T, error) {
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
func deleteCounting(ctx context.Context, tx dbtx, q, list string, c *store.PurgeCount) error {
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
	counts := []count{{`SELECT count(t), min(t), max(t) FROM (SELECT completed_at AS t FROM effects WHERE effect_key IN (` + purgeableEffects + `)
		UNION ALL SELECT key_completed_at FROM steps WHERE id IN (` + purgeableHeldKeys + `))`, ts(p.Now), &r.Effects}}
	if !p.RunsBefore.IsZero() {
		cut := ts(p.RunsBefore)
		// What the runs hold, as purgeRuns counts it.
		steps := `(SELECT id FROM steps WHERE run_id IN (` + purgeableRuns + `))`
		counts = append(counts,
			count{`SELECT count(*), min(updated_at), max(updated_at) FROM runs WHERE id IN (` + purgeableRuns + `)`, cut, &r.Runs},
			count{`SELECT count(*), min(updated_at), max(updated_at) FROM steps WHERE run_id IN (` + purgeableRuns + `)`, cut, &r.Steps},
			count{`SELECT count(t), min(t), max(t) FROM (SELECT started_at AS t FROM attempts WHERE step_id IN ` + steps + `
				UNION ALL SELECT claimed_at FROM steps WHERE claim_event_id > 0 AND run_id IN (` + purgeableRuns + `))`, cut, &r.Attempts},
			count{`SELECT count(t), min(t), max(t) FROM (SELECT at AS t FROM events WHERE run_id IN (` + purgeableRuns + `)
				UNION ALL SELECT created_at FROM runs WHERE created_event_id IS NOT NULL AND id IN (` + purgeableRuns + `)
				UNION ALL SELECT started_at FROM attempts WHERE claim_event_id IS NOT NULL AND step_id IN ` + steps + `
				UNION ALL SELECT ended_at FROM attempts WHERE end_derived = 1 AND step_id IN ` + steps + `
				UNION ALL SELECT started_at FROM attempts WHERE claim_run_event_id IS NOT NULL AND step_id IN ` + steps + `
				UNION ALL SELECT ended_at FROM attempts WHERE end_run_event_id IS NOT NULL AND step_id IN ` + steps + `
				UNION ALL SELECT claimed_at FROM steps WHERE claim_event_id > 0 AND run_id IN (` + purgeableRuns + `)
				UNION ALL SELECT claimed_at FROM steps WHERE claim_event_id > 0 AND claim_run_event_id IS NOT NULL AND run_id IN (` + purgeableRuns + `))`,
				cut, &r.Events},
		)
	}
	for _, c := range counts {
		var n int
		var oldest, newest sql.NullInt64
		args := make([]any, strings.Count(c.sql, "?"))
		for i := range args {
			args[i] = c.arg
		}
		if err := tx.QueryRowContext(ctx, c.sql, args...).Scan(&n, &oldest, &newest); err != nil {
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
