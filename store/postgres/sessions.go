package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

var _ store.SessionStore = (*Store)(nil)

const sessionColumns = `id, actor, grants::text, client, created_at, seen_at, expires_at, ended_at, ended_by, end_reason`

func scanSession(sc pgx.Row) (*store.Session, error) {
	var s store.Session
	var grants string
	var ended *time.Time
	if err := sc.Scan(&s.ID, &s.Actor, &grants, &s.Client, &s.CreatedAt, &s.SeenAt, &s.ExpiresAt, &ended, &s.EndedBy, &s.EndReason); err != nil {
		return nil, err
	}
	s.Grants = []byte(grants)
	if ended != nil {
		s.EndedAt = *ended
	}
	return &s, nil
}

// SessionInsert implements store.SessionStore.
func (s *Store) SessionInsert(ctx context.Context, p store.SessionInsertParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("postgres: %w", err)
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
	return s.tx(ctx, "session insert", func(t *txn) error {
		tag, err := t.Exec(ctx, `INSERT INTO console_sessions (id, actor, grants, client, created_at, seen_at, expires_at)
			VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
			ss.ID, clean(ss.Actor), grants, clean(ss.Client), ss.CreatedAt, seen, ss.ExpiresAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("session insert: %w", store.ErrSessionExists)
		}
		if p.Event != nil {
			e := *p.Event
			t.event(&e)
		}
		if !p.PurgeBefore.IsZero() {
			if _, err := t.Exec(ctx, `DELETE FROM console_sessions WHERE expires_at < $1`, p.PurgeBefore); err != nil {
				return err
			}
		}
		return nil
	})
}

// SessionGet implements store.SessionStore.
func (s *Store) SessionGet(ctx context.Context, id string) (*store.Session, error) {
	var ss *store.Session
	err := s.read(ctx, "session get", func(q querier) error {
		var err error
		ss, err = scanSession(q.QueryRow(ctx, `SELECT `+sessionColumns+` FROM console_sessions WHERE id = $1`, clean(id)))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: session %s: %w", store.ShortSession(id), store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// SessionTouch implements store.SessionStore.
func (s *Store) SessionTouch(ctx context.Context, id string, at time.Time) error {
	return s.tx(ctx, "session touch", func(t *txn) error {
		_, err := t.Exec(ctx, `UPDATE console_sessions SET seen_at = $2 WHERE id = $1 AND ended_at IS NULL AND seen_at < $2 AND expires_at > $2`, clean(id), at)
		return err
	})
}

// SessionEnd implements store.SessionStore.
func (s *Store) SessionEnd(ctx context.Context, p store.SessionEndParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	ended := false
	err := s.tx(ctx, "session end", func(t *txn) error {
		ended = false
		tag, err := t.Exec(ctx, `UPDATE console_sessions SET ended_at = $2, ended_by = $3, end_reason = $4 WHERE id = $1 AND ended_at IS NULL`,
			clean(p.ID), p.Now, clean(p.By), clean(p.Reason))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			ended = true
			if p.Event != nil {
				e := *p.Event
				t.event(&e)
			}
			return nil
		}
		var one int
		if err := t.QueryRow(ctx, `SELECT 1 FROM console_sessions WHERE id = $1`, clean(p.ID)).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
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
	q := `SELECT ` + sessionColumns + ` FROM console_sessions WHERE (ended_at IS NULL AND expires_at > $1)`
	args := []any{p.Now}
	if p.Ended {
		q += ` OR ended_at >= $2 OR (ended_at IS NULL AND expires_at <= $1 AND expires_at >= $2)`
		args = append(args, p.EndedSince)
	}
	q += fmt.Sprintf(` ORDER BY created_at DESC, id LIMIT %d`, p.SessionListLimit())
	var out []*store.Session
	err := s.read(ctx, "session list", func(q2 querier) error {
		out = nil
		rows, err := q2.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			ss, err := scanSession(rows)
			if err != nil {
				return err
			}
			out = append(out, ss)
		}
		return rows.Err()
	})
	return out, err
}
