package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection delays of a notification listener that lost its connection.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

// Notifications implements store.Notifier with LISTEN/NOTIFY. RunInsert, RunInsertMany,
// StepRecord, StepReapExpired and the other writes that make a step due now notify once
// their transaction committed (notifyLater); RunInsertTx notifies from inside the caller's
// transaction, delivered if it commits. Each call listens on a dedicated connection,
// outside the pool, which reconnects with jittered backoff when it is lost and then sends
// a value, since notifications may have been missed.
func (s *Store) Notifications(ctx context.Context) (<-chan struct{}, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("postgres: notifications: the store is closed")
	}
	s.listeners.Add(1)
	s.mu.Unlock()

	conn, err := s.listen(ctx)
	if err != nil {
		s.listeners.Done()
		return nil, fmt.Errorf("postgres: notifications: %w", err)
	}
	ch := make(chan struct{}, 1)
	lctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.stopCtx, cancel)
	go func() {
		defer s.listeners.Done()
		defer close(ch)
		defer cancel()
		defer stop()
		s.listenLoop(lctx, conn, ch)
	}()
	return ch, nil
}

// listen opens a connection that listens on the store's channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.config.ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, err
	}
	return conn, nil
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// listenLoop forwards notifications to ch, coalesced, until ctx ends.
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn, ch chan<- struct{}) {
	send := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	delay := listenRetryMin
	for {
		if conn == nil {
			t := time.NewTimer(delay/2 + rand.N(delay/2+1))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			var err error
			if conn, err = s.listen(ctx); err != nil {
				delay = min(2*delay, listenRetryMax)
				continue
			}
			delay = listenRetryMin
			send() // notifications may have been missed while disconnected
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			closeConn(conn)
			conn = nil
			if ctx.Err() != nil {
				return
			}
			continue
		}
		send()
	}
}

// notifyTimeout bounds the sending of one notification.
const notifyTimeout = 5 * time.Second

// notifyLater notifies the listeners that steps are due, after the transaction that made
// them due committed. The notifications are sent one at a time, each in a statement of its
// own, by one goroutine that runs while there are some to send: the commits that happen
// while one is sent are covered by the next. A NOTIFY inside the transactions themselves
// would make each of them take PostgreSQL's notification queue lock until its commit is
// flushed, so that concurrent commits of the write path could not share a WAL flush.
// A notification that cannot be sent is sent again after a pause, until the store closes.
func (s *Store) notifyLater() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.notifyWanted = true
	if s.notifying {
		return
	}
	s.notifying = true
	s.listeners.Add(1)
	go s.notifier()
}

// notifier sends notifications until none is wanted.
func (s *Store) notifier() {
	defer s.listeners.Done()
	for {
		s.mu.Lock()
		if !s.notifyWanted || s.closed {
			s.notifying = false
			s.mu.Unlock()
			return
		}
		s.notifyWanted = false
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.stopCtx, notifyTimeout)
		_, err := s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, s.channel)
		cancel()
		if err != nil {
			s.mu.Lock()
			s.notifyWanted = true
			s.mu.Unlock()
			t := time.NewTimer(listenRetryMin)
			select {
			case <-s.stopCtx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}
