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

// Notifications implements store.Notifier with LISTEN/NOTIFY. RunInsert, RunInsertMany (and RunInsertTx,
// on the caller's commit), StepRecord and StepReapExpired notify, from inside their
// transactions, when they make a step due now; PostgreSQL delivers a notification only if
// its transaction commits. Each call listens on a dedicated connection, outside the pool,
// which reconnects with jittered backoff when it is lost and then sends a value, since
// notifications may have been missed.
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
