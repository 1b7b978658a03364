package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// conn is what a transaction of the store sends its statements on: a pooledTx, or the
// savepoint of a caller's transaction (RunInsertTx).
type conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pooledTx is a read committed transaction on a pooled connection whose BEGIN is sent in
// the same round trip as its first statement (pgx.Batch.BeginTx), and whose COMMIT may be
// sent in the same round trip as its last ones (txn.flushCommit). Until its first statement
// nothing has been sent and no connection is held: a transaction that sends nothing
// commits nothing. It ends with commit, rollback or, after a COMMIT sent in a batch,
// release, which hand the connection back to the pool.
type pooledTx struct {
	pool *pgxpool.Pool
	// settings are sent right after BEGIN: statements that set the transaction's
	// settings (set_config(…, true)).
	settings []string
	// c is the connection once the first statement was sent, and tx the transaction on it;
	// begun is set once BEGIN succeeded.
	c     *pgxpool.Conn
	tx    pgx.Tx
	begun bool
}

// SendBatch sends b, preceded by BEGIN if the transaction has not begun.
func (x *pooledTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if x.tx != nil {
		return x.tx.SendBatch(ctx, b)
	}
	c, err := x.pool.Acquire(ctx)
	if err != nil {
		return errBatch{err}
	}
	x.c = c
	nb := &pgx.Batch{}
	nb.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	for _, set := range x.settings {
		nb.Queue(set)
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := c.SendBatch(ctx, nb)
	x.tx = br.Tx()
	if _, err := br.Exec(); err != nil {
		br.Close()
		return errBatch{err}
	}
	x.begun = true
	for range x.settings {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return errBatch{err}
		}
	}
	return br
}

// Exec implements conn.
func (x *pooledTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if x.tx != nil {
		return x.tx.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := x.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query implements conn.
func (x *pooledTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if x.tx != nil {
		return x.tx.Query(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := x.SendBatch(ctx, b)
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow implements conn.
func (x *pooledTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if x.tx != nil {
		return x.tx.QueryRow(ctx, sql, args...)
	}
	rows, err := x.Query(ctx, sql, args...)
	return &firstRow{rows: rows, err: err}
}

// connLost reports whether the transaction's connection was closed (the server then
// rolled the transaction back). Ask before rollback, which hands the connection back.
func (x *pooledTx) connLost() bool {
	return x.begun && x.c.Conn().IsClosed()
}

// commit commits the transaction, if it began.
func (x *pooledTx) commit(ctx context.Context) error {
	if x.tx == nil {
		return nil
	}
	defer x.release()
	return x.tx.Commit(ctx)
}

// rollback rolls the transaction back, if it was sent. A connection on which that fails is
// closed.
func (x *pooledTx) rollback(ctx context.Context) {
	if x.tx != nil {
		_ = x.tx.Rollback(ctx)
	}
	x.release()
}

// release hands the connection back to the pool, which closes it unless it is idle,
// outside a transaction.
func (x *pooledTx) release() {
	if x.c != nil {
		x.c.Release()
		x.c = nil
	}
}

// batchRows are the rows of a statement sent in a batch of its own: closing them closes
// the batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// firstRow is the first row of rows, as pgx.Conn.QueryRow returns it.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r *firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errBatch is the result of a batch that failed as a whole.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return &firstRow{err: b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
