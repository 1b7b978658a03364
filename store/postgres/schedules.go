package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

var _ store.ScheduleStore = (*Store)(nil)

const scheduleColumns = `name, through, last_tick, last_run_id, updated_at`

func scanSchedule(row pgx.Row) (*store.ScheduleState, error) {
	var s store.ScheduleState
	var through, last, updated pgtype.Timestamptz
	if err := row.Scan(&s.Name, &through, &last, &s.LastRunID, &updated); err != nil {
		return nil, err
	}
	s.Through, s.LastTick, s.UpdatedAt = fromTS(through), fromTS(last), fromTS(updated)
	return &s, nil
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*store.ScheduleState, error) {
	var st *store.ScheduleState
	err := s.read(ctx, "schedule get", func(q querier) error {
		var err error
		st, err = scanSchedule(q.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = $1`, name))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: schedule %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context) ([]*store.ScheduleState, error) {
	var out []*store.ScheduleState
	err := s.read(ctx, "schedule list", func(q querier) error {
		out = nil
		rows, err := q.Query(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			st, err := scanSchedule(rows)
			if err != nil {
				return err
			}
			out = append(out, st)
		}
		return rows.Err()
	})
	return out, err
}

// ScheduleAdvance implements store.ScheduleStore: an insert for a schedule without state,
// an update compare-and-set on through otherwise; concurrent advances serialize on the row.
func (s *Store) ScheduleAdvance(ctx context.Context, p store.ScheduleAdvanceParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	var last *pgtype.Timestamptz
	if !p.LastTick.IsZero() {
		last = &pgtype.Timestamptz{Time: p.LastTick, Valid: true}
	}
	var applied bool
	err := s.tx(ctx, "schedule advance", func(t *txn) error {
		var q string
		args := []any{p.Name, p.To, last, p.LastRunID, p.Now}
		if p.From.IsZero() {
			q = `INSERT INTO schedules (name, through, last_tick, last_run_id, updated_at) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (name) DO NOTHING`
		} else {
			q = `UPDATE schedules SET through = $2, last_tick = coalesce($3, last_tick),
					last_run_id = CASE WHEN $3::timestamptz IS NULL THEN last_run_id ELSE $4 END, updated_at = $5
				WHERE name = $1 AND through = $6`
			args = append(args, p.From)
		}
		tag, err := t.Exec(ctx, q, args...)
		if err != nil {
			return err
		}
		applied = tag.RowsAffected() == 1
		if applied {
			for _, e := range p.Events {
				t.event(e)
			}
		}
		return nil
	})
	return applied, err
}
