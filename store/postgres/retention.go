package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

var _ store.RetentionStore = (*Store)(nil)

// nullTime is t for a nullable timestamptz column: NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// unfinishedStep is true for a step u that has not finished: anything but completed,
// failed, skipped and cancelled (a state added later counts as unfinished, so it keeps).
const unfinishedStep = `u.state NOT IN ('completed', 'failed', 'skipped', 'cancelled')`

// purgeableRun is true for a run r that a purge deletes: finished, with every step
// finished, last changed before @cutoff.
const purgeableRun = `r.state IN ('completed', 'failed', 'cancelled') AND r.updated_at < @cutoff
	AND NOT EXISTS (SELECT 1 FROM steps u WHERE u.run_id = r.id AND ` + unfinishedStep + `)`

// purgeableEffect is true for a ledger row e that a purge deletes: completed, with a
// retention that ended at or before @now, and referred to by no run that is unfinished:
// neither the run that completed the key nor any run with a step under that key.
const purgeableEffect = `e.state = 'completed' AND e.retain_until <= @now
	AND NOT EXISTS (SELECT 1 FROM steps u WHERE u.run_id = e.run_id AND ` + unfinishedStep + `)
	AND NOT EXISTS (SELECT 1 FROM steps s JOIN steps u ON u.run_id = s.run_id
	                WHERE s.effect_key = e.effect_key AND s.effect_key <> '' AND ` + unfinishedStep + `)`

// purgeableHeldKey is true for a step h whose key a purge frees, by the same rule: a key
// held, completed, in the row of a step (see ledger.go) is released in place.
const purgeableHeldKey = `h.key_slot = 0 AND h.key_state = 'completed' AND h.key_retain_until <= @now
	AND NOT EXISTS (SELECT 1 FROM steps u WHERE u.run_id = h.run_id AND ` + unfinishedStep + `)
	AND NOT EXISTS (SELECT 1 FROM steps s JOIN steps u ON u.run_id = s.run_id
	                WHERE s.effect_key = h.effect_key AND s.effect_key <> '' AND ` + unfinishedStep + `)`

// RetentionPurge implements store.RetentionStore. Each batch locks the rows it will delete
// with FOR UPDATE SKIP LOCKED, so concurrent purges in any process take different rows,
// and checks them again under the lock with a new snapshot before deleting them: a run
// cannot change state meanwhile, since every change of a step locks its run first.
func (s *Store) RetentionPurge(ctx context.Context, p store.RetentionPurgeParams) (*store.PurgeReport, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if p.DryRun {
		return s.purgeDryRun(ctx, p)
	}
	defer s.purges.Begin()()
	return store.PurgeBatches(p, func(size, n int) (*store.PurgeReport, error) {
		var batch *store.PurgeReport
		err := s.tx(ctx, "retention purge", func(t *txn) error {
			var err error
			batch, err = purgeBatch(ctx, t, p, size, n)
			return err
		})
		return batch, err
	}, func(total *store.PurgeReport) error {
		return s.tx(ctx, "retention purge", func(t *txn) error {
			t.event(purgeEvent(p, total, 0))
			return nil
		})
	})
}

// purgeBatch deletes up to size runs (with their steps, attempts and events) and up to
// size ledger rows, and appends the event that records it when it deleted anything.
func purgeBatch(ctx context.Context, t *txn, p store.RetentionPurgeParams, size, n int) (*store.PurgeReport, error) {
	r := &store.PurgeReport{}
	if !p.RunsBefore.IsZero() {
		args := pgx.NamedArgs{"cutoff": p.RunsBefore, "limit": size}
		locked, err := column[int64](ctx, t, `SELECT r.id FROM runs r WHERE `+purgeableRun+`
			ORDER BY r.updated_at, r.id LIMIT @limit FOR UPDATE SKIP LOCKED`, args)
		if err != nil {
			return nil, err
		}
		if len(locked) > 0 {
			// Again under the lock, with a snapshot that sees every commit before it.
			args["ids"] = locked
			ids, err := column[int64](ctx, t, `SELECT r.id FROM runs r WHERE r.id = ANY(@ids) AND `+purgeableRun, args)
			if err != nil {
				return nil, err
			}
			// The keys their steps hold stay in the ledger, in effects, as they are: a
			// completed key still answers done.
			if _, err := t.Exec(ctx, retireSQL, ids); err != nil {
				return nil, err
			}
			// The stored events and the events the runs, steps and attempts derive (see
			// store/derive.go); the attempts that ended and those in flight.
			for _, d := range []struct {
				sql    string
				counts []*store.PurgeCount
			}{
				{`DELETE FROM events WHERE run_id = ANY($1) RETURNING at`, []*store.PurgeCount{&r.Events}},
				{`DELETE FROM attempts WHERE step_id IN (SELECT id FROM steps WHERE run_id = ANY($1))
					RETURNING started_at, NULL::timestamptz, CASE WHEN claim_event_id IS NOT NULL THEN started_at END,
						CASE WHEN end_derived THEN ended_at END, CASE WHEN claim_run_event_id IS NOT NULL THEN started_at END,
						CASE WHEN end_run_event_id IS NOT NULL THEN ended_at END`,
					[]*store.PurgeCount{&r.Attempts, &r.Steps, &r.Events, &r.Events, &r.Events, &r.Events}},
				{`DELETE FROM steps WHERE run_id = ANY($1)
					RETURNING CASE WHEN claim_event_id > 0 THEN claimed_at END, updated_at, CASE WHEN claim_event_id > 0 THEN claimed_at END,
						CASE WHEN claim_event_id > 0 AND claim_run_event_id IS NOT NULL THEN claimed_at END`,
					[]*store.PurgeCount{&r.Attempts, &r.Steps, &r.Events, &r.Events}},
				{`DELETE FROM runs WHERE id = ANY($1) RETURNING CASE WHEN created_event_id IS NOT NULL THEN created_at END, updated_at`,
					[]*store.PurgeCount{&r.Events, &r.Runs}},
			} {
				if err := deleteCountingEach(ctx, t, d.sql, ids, d.counts); err != nil {
					return nil, err
				}
			}
		}
	}
	args := pgx.NamedArgs{"now": p.Now, "limit": size}
	locked, err := column[string](ctx, t, `SELECT e.effect_key FROM effects e WHERE `+purgeableEffect+`
		ORDER BY e.retain_until, e.effect_key LIMIT @limit FOR UPDATE SKIP LOCKED`, args)
	if err != nil {
		return nil, err
	}
	if len(locked) > 0 {
		args["keys"] = locked
		if err := deleteCounting(ctx, t, `DELETE FROM effects e WHERE e.effect_key = ANY(@keys) AND `+purgeableEffect+` RETURNING e.completed_at`, args, &r.Effects); err != nil {
			return nil, err
		}
	}
	if left := size - len(locked); left > 0 {
		args := pgx.NamedArgs{"now": p.Now, "limit": left}
		held, err := column[int64](ctx, t, `SELECT h.id FROM steps h WHERE `+purgeableHeldKey+`
			ORDER BY h.key_retain_until, h.id LIMIT @limit FOR UPDATE SKIP LOCKED`, args)
		if err != nil {
			return nil, err
		}
		if len(held) > 0 {
			args["ids"] = held
			if err := deleteCounting(ctx, t, `UPDATE steps h SET key_slot = h.id, key_state = '', key_retain_until = NULL
				WHERE h.id = ANY(@ids) AND `+purgeableHeldKey+` RETURNING h.key_completed_at`, args, &r.Effects); err != nil {
				return nil, err
			}
		}
	}
	if !r.Empty() {
		t.event(purgeEvent(p, r, n))
	}
	return r, nil
}

// column runs a query returning one column.
func column[T any](ctx context.Context, q querier, sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[T])
}

// deleteCounting runs a DELETE … RETURNING of one timestamp and counts what it deleted.
func deleteCounting(ctx context.Context, q querier, sql string, arg any, c *store.PurgeCount) error {
	rows, err := q.Query(ctx, sql, arg)
	if err != nil {
		return err
	}
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&at}, func() error {
		c.Observe(at.UTC())
		return nil
	})
	return err
}

// deleteCountingEach runs a DELETE … RETURNING of nullable times and counts each non-NULL
// one in the count of its column.
func deleteCountingEach(ctx context.Context, q querier, sql string, arg any, counts []*store.PurgeCount) error {
	rows, err := q.Query(ctx, sql, arg)
	if err != nil {
		return err
	}
	vals := make([]pgtype.Timestamptz, len(counts))
	dest := make([]any, len(counts))
	for i := range vals {
		dest[i] = &vals[i]
	}
	_, err = pgx.ForEachRow(rows, dest, func() error {
		for i, v := range vals {
			if v.Valid {
				counts[i].Observe(v.Time.UTC())
			}
		}
		return nil
	})
	return err
}

// purgeDryRun counts, in one repeatable-read transaction (one snapshot), what a purge
// would delete.
func (s *Store) purgeDryRun(ctx context.Context, p store.RetentionPurgeParams) (*store.PurgeReport, error) {
	var r *store.PurgeReport
	err := s.read(ctx, "retention purge (dry run)", func(querier) error {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		r = &store.PurgeReport{DryRun: true}
		type count struct {
			sql string
			c   *store.PurgeCount
		}
		counts := []count{{`SELECT count(t), min(t), max(t) FROM (SELECT e.completed_at FROM effects e WHERE ` + purgeableEffect + `
			UNION ALL SELECT h.key_completed_at FROM steps h WHERE ` + purgeableHeldKey + `) AS x(t)`, &r.Effects}}
		if !p.RunsBefore.IsZero() {
			counts = append(counts,
				count{`SELECT count(*), min(r.updated_at), max(r.updated_at) FROM runs r WHERE ` + purgeableRun, &r.Runs},
				count{`SELECT count(*), min(x.updated_at), max(x.updated_at) FROM steps x WHERE x.run_id IN (SELECT r.id FROM runs r WHERE ` + purgeableRun + `)`, &r.Steps},
				count{`SELECT count(t), min(t), max(t) FROM (
					SELECT x.started_at FROM attempts x WHERE x.step_id IN (SELECT id FROM steps WHERE run_id IN (SELECT r.id FROM runs r WHERE ` + purgeableRun + `))
					UNION ALL SELECT x.claimed_at FROM steps x WHERE x.claim_event_id > 0 AND x.run_id IN (SELECT r.id FROM runs r WHERE ` + purgeableRun + `)) AS a(t)`,
					&r.Attempts},
				count{`SELECT count(t), min(t), max(t) FROM (
					SELECT x.at FROM events x WHERE x.run_id IN (SELECT r.id FROM runs r WHERE ` + purgeableRun + `)
					UNION ALL SELECT r.created_at FROM runs r WHERE r.created_event_id IS NOT NULL AND ` + purgeableRun + `
					UNION ALL SELECT t FROM attempts x, LATERAL (VALUES (CASE WHEN x.claim_event_id IS NOT NULL THEN x.started_at END),
						(CASE WHEN x.end_derived THEN x.ended_at END), (CASE WHEN x.claim_run_event_id IS NOT NULL THEN x.started_at END),
						(CASE WHEN x.end_run_event_id IS NOT NULL THEN x.ended_at END)) v(t)
						WHERE t IS NOT NULL AND x.step_id IN (SELECT id FROM steps WHERE run_id IN (SELECT r.id FROM runs r WHERE ` + purgeableRun + `))
					UNION ALL SELECT t FROM steps x, LATERAL (VALUES (x.claimed_at), (CASE WHEN x.claim_run_event_id IS NOT NULL THEN x.claimed_at END)) v(t)
						WHERE t IS NOT NULL AND x.claim_event_id > 0 AND x.run_id IN (SELECT r.id FROM runs r WHERE ` + purgeableRun + `)) AS e(t)`,
					&r.Events},
			)
		}
		args := pgx.NamedArgs{"now": p.Now, "cutoff": p.RunsBefore}
		for _, c := range counts {
			var n int
			var oldest, newest pgtype.Timestamptz
			if err := tx.QueryRow(ctx, c.sql, args).Scan(&n, &oldest, &newest); err != nil {
				return err
			}
			if n > 0 {
				*c.c = store.PurgeCount{Count: n, Oldest: fromTS(oldest), Newest: fromTS(newest)}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
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
