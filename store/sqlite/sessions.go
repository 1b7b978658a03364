package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/store"
)

var _ store.SessionStore = (*Store)(nil)

const sessionColumns = `id, actor, grants, client, created_at, seen_at, expires_at, ended_at, ended_by, end_reason`

func scanSession(sc scanner) (*store.Session, error) {
	var s store.Session
	var grants string
	var created, seen, expires, ended int64
	if err := sc.Scan(&s.ID, &s.Actor, &grants, &s.Client, &created, &seen, &expires, &ended, &s.EndedBy, &s.EndReason); err != nil {
		return nil, err
	}
	s.Grants = []byte(grants)
	s.CreatedAt, s.SeenAt, s.ExpiresAt, s.EndedAt = fromTS(created), fromTS(seen), fromTS(expires), fromTS(ended)
	return &s, nil
}

// SessionInsert implements store.SessionStore.
func (s *Store) SessionInsert(ctx context.Context, p store.SessionInsertParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	ss := &p.Session
	grants := string(ss.Grants)
	if grants == "" {
		grants = "{}"
	}
	seen := ss.SeenAt
	if seen.IsZero() {
		seen = ss.CreatedAt
	}
	return s.write(ctx, "session insert", func(w *writeTx) error {
		r, err := w.tx.ExecContext(ctx, `INSERT INTO console_sessions (id, actor, grants, client, created_at, seen_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			ss.ID, ss.Actor, grants, ss.Client, ts(ss.CreatedAt), ts(seen), ts(ss.ExpiresAt))
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("session insert: %w", store.ErrSessionExists)
		}
		if p.Event != nil {
			e := *p.Event
			w.event(&e)
		}
		if !p.PurgeBefore.IsZero() {
			if _, err := w.tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE expires_at < ?`, ts(p.PurgeBefore)); err != nil {
				return err
			}
		}
		return nil
	})
}

// SessionGet implements store.SessionStore.
func (s *Store) SessionGet(ctx context.Context, id string) (*store.Session, error) {
	ss, err := scanSession(s.r.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM console_sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: session %s: %w", store.ShortSession(id), store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: session get: %w", unavailable(err))
	}
	return ss, nil
}

// SessionTouch implements store.SessionStore.
func (s *Store) SessionTouch(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, "session touch", func(w *writeTx) error {
		_, err := w.tx.ExecContext(ctx, `UPDATE console_sessions SET seen_at = ? WHERE id = ? AND ended_at = 0 AND seen_at < ? AND expires_at > ?`,
			ts(at), id, ts(at), ts(at))
		return err
	})
}

// SessionEnd implements store.SessionStore.
func (s *Store) SessionEnd(ctx context.Context, p store.SessionEndParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	ended := false
	err := s.write(ctx, "session end", func(w *writeTx) error {
		r, err := w.tx.ExecContext(ctx, `UPDATE console_sessions SET ended_at = ?, ended_by = ?, end_reason = ? WHERE id = ? AND ended_at = 0`,
			ts(p.Now), p.By, p.Reason, p.ID)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 1 {
			ended = true
			if p.Event != nil {
				e := *p.Event
				w.event(&e)
			}
			return nil
		}
		var one int
		if err := w.tx.QueryRowContext(ctx, `SELECT 1 FROM console_sessions WHERE id = ?`, p.ID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %s: %w", store.ShortSession(p.ID), store.ErrNotFound)
		} else if err != nil {
			return err
		}
		return nil
	})
	return ended, err
}

// SessionList implements store.SessionStore.
func (s *Store) SessionList(ctx context.Context, p store.SessionListParams) ([]*store.Session, error) {
	q := `SELECT ` + sessionColumns + ` FROM console_sessions WHERE (ended_at = 0 AND expires_at > ?)`
	args := []any{ts(p.Now)}
	if p.Ended {
		q += ` OR (ended_at >= ?) OR (ended_at = 0 AND expires_at <= ? AND expires_at >= ?)`
		args = append(args, ts(p.EndedSince), ts(p.Now), ts(p.EndedSince))
	}
	q += ` ORDER BY created_at DESC, id LIMIT ?`
	args = append(args, p.SessionListLimit())
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: session list: %w", unavailable(err))
	}
	defer rows.Close()
	var out []*store.Session
	for rows.Next() {
		ss, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: session list: %w", err)
		}
		out = append(out, ss)
	}
	return out, rows.Err()
}
