package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

var _ store.ScheduleStore = (*Store)(nil)

const scheduleColumns = `name, through, last_tick, last_run_id, updated_at`

func scanSchedule(sc scanner) (*store.ScheduleState, error) {
	var s store.ScheduleState
	var through, last, updated int64
	if err := sc.Scan(&s.Name, &through, &last, &s.LastRunID, &updated); err != nil {
		return nil, err
	}
	s.Through, s.LastTick, s.UpdatedAt = fromTS(through), fromTS(last), fromTS(updated)
	return &s, nil
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*store.ScheduleState, error) {
	st, err := scanSchedule(s.r.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: schedule %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: schedule get: %w", err)
	}
	return st, nil
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context) ([]*store.ScheduleState, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: schedule list: %w", err)
	}
	defer rows.Close()
	var out []*store.ScheduleState
	for rows.Next() {
		st, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: schedule list: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// ScheduleAdvance implements store.ScheduleStore: an insert for a schedule without state,
// an update compare-and-set on through otherwise.
func (s *Store) ScheduleAdvance(ctx context.Context, p store.ScheduleAdvanceParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	var applied bool
	err := s.write(ctx, "schedule advance", func(w *writeTx) error {
		tx := w.tx
		var r sql.Result
		var err error
		if p.From.IsZero() {
			r, err = tx.ExecContext(ctx, `INSERT INTO schedules (name, through, last_tick, last_run_id, updated_at) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (name) DO NOTHING`, p.Name, ts(p.To), ts(p.LastTick), p.LastRunID, ts(p.Now))
		} else {
			r, err = tx.ExecContext(ctx, `UPDATE schedules SET through = ?,
					last_tick = CASE WHEN ? = 0 THEN last_tick ELSE ? END,
					last_run_id = CASE WHEN ? = 0 THEN last_run_id ELSE ? END, updated_at = ?
				WHERE name = ? AND through = ?`,
				ts(p.To), ts(p.LastTick), ts(p.LastTick), ts(p.LastTick), p.LastRunID, ts(p.Now), p.Name, ts(p.From))
		}
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		applied = n == 1
		if !applied {
			return nil
		}
		for _, e := range p.Events {
			c := *e // the caller's event keeps its ID
			w.event(&c)
		}
		return nil
	})
	return applied, err
}
