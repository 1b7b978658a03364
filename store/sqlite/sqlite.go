// Package sqlite is onceflow's embedded store: a single SQLite file in WAL mode, opened
// through the pure-Go driver modernc.org/sqlite, so nothing needs to be installed.
//
// Writes go through one connection whose transactions begin IMMEDIATE, so two writers in
// this process never deadlock on a lock upgrade; other processes sharing the file wait up
// to BusyTimeout. synchronous=FULL is the default: a transaction that returned has reached
// the disk. A write that still finds the file locked after BusyTimeout, and a connection
// that cannot open the file, fail with store.ErrUnavailable.
//
// The database holds the runs' inputs unmasked (e-mail addresses, phone numbers): Open
// creates a new file readable and writable by its owner only (0600, whatever the umask),
// and SQLite gives the -wal and -shm files it creates beside it the database file's mode.
// An existing file, -wal or -shm that the group or others may read is logged as a warning
// naming it; Open leaves its mode as it is.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/store"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ store.Store = (*Store)(nil)

// Options tune how the database file is opened. The zero value is the safe default.
type Options struct {
	// Synchronous is SQLite's synchronous pragma: "FULL" (default) makes every commit
	// durable before it returns; "NORMAL" may lose the last commits on power loss.
	Synchronous string
	// BusyTimeout is how long a writer waits for another process's lock (default 10 s).
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool (default 4).
	ReadConns int
	// Logger receives the warning about a database file that others may read (default
	// slog.Default()).
	Logger *slog.Logger
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	// purges counts the purges made through the store (store.PurgeCounter).
	purges store.Purges

	path string
	w    *sql.DB // one connection, held as wc
	r    *sql.DB // read-only pool
	// wc is w's one connection, held for the store's life: every write transaction runs on
	// it, one at a time (wlock), begun with BEGIN IMMEDIATE. Its statements are prepared on
	// it (prep) and run without a database/sql transaction, whose every query starts a
	// goroutine to watch the transaction's context.
	wc    *sql.Conn
	wlock chan struct{}
	// closed is set by Close under wlock: a write that comes after it is refused instead
	// of reaching statements Close finalized.
	closed bool
	// prep holds the write path's statements, prepared on wc (see statements.go).
	prep *statements
	// runByKey is RunGetByKey's statement, prepared on r.
	runByKey *sql.Stmt
	// seq is the writer's copy of the audit sequence (auditseq.go).
	seq auditSeq
	// cache is what the last write transaction left of the runs it wrote
	// (writecache.go); guarded by wlock.
	cache *writeCache
}

// Open opens (creating if needed) the database file at path and migrates it to the newest
// schema.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: open: empty path; give a file path such as ./onceflow.db")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: open %q: the path must not contain '?' or '#'", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return nil, fmt.Errorf("sqlite: open %q: directory %q does not exist", path, dir)
		}
	}
	sync := strings.ToUpper(opts.Synchronous)
	switch sync {
	case "":
		sync = "FULL"
	case "FULL", "NORMAL", "EXTRA":
	default:
		return nil, fmt.Errorf("sqlite: open: synchronous %q is not one of FULL, NORMAL, EXTRA", opts.Synchronous)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	readConns := opts.ReadConns
	if readConns <= 0 {
		readConns = 4
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "foreign_keys(ON)")
	wq := url.Values{}
	for k, v := range q {
		wq[k] = slices.Clone(v)
	}
	wq.Set("_txlock", "immediate")
	// The writer keeps the hot pages of the tables and indexes it changes in memory
	// (32 MiB instead of SQLite's 2 MiB), and the temporary tables of its statements too.
	wq.Add("_pragma", "cache_size(-32768)")
	wq.Add("_pragma", "temp_store(MEMORY)")

	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := privateFiles(path, log); err != nil {
		return nil, err
	}

	w, err := openDB(path + "?" + wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	rq := url.Values{}
	for k, v := range q {
		rq[k] = slices.Clone(v)
	}
	rq.Add("_pragma", "query_only(1)")
	r, err := openDB(path + "?" + rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)

	s := &Store{path: path, w: w, r: r, wlock: make(chan struct{}, 1)}
	if s.wc, err = w.Conn(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, unavailable(err))
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if s.prep, err = prepare(ctx, s.wc); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	if s.runByKey, err = r.PrepareContext(ctx, stmtSQL[stmtRunByKey]); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	return s, nil
}

// privateFiles creates the database file at path, if there is none, readable and
// writable by its owner only — before the driver opens it, which would create it with the
// mode SQLite defaults to (0644) less the umask — and logs a warning for each existing
// database, -wal or -shm file that the group or others may read. SQLite creates the -wal
// and -shm files with the database file's mode.
func privateFiles(path string, log *slog.Logger) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		// The umask may have taken bits away (0o400 under umask 0o277): set the mode
		// itself. The empty file is an empty database.
		err = f.Chmod(0o600)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sqlite: create %q: %w", path, err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("sqlite: create %q: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			continue // -wal and -shm exist only while a connection is open
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			log.Warn("sqlite: the database file can be read by other users of this machine, and it holds inputs unmasked; restrict it with chmod 600",
				"path", p, "mode", fmt.Sprintf("%04o", mode))
		}
	}
	return nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes both connection pools.
func (s *Store) Close() error {
	// A write in progress finishes first: its prepared statements are not finalized under it.
	s.wlock <- struct{}{}
	defer func() { <-s.wlock }()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.prep != nil {
		errs = append(errs, s.prep.close())
	}
	if s.runByKey != nil {
		errs = append(errs, s.runByKey.Close())
	}
	if s.wc != nil {
		errs = append(errs, s.wc.Close())
	}
	return errors.Join(append(errs, s.w.Close(), s.r.Close())...)
}

// dbtx is what the write connection offers a transaction's code (and a *sql.Tx does too).
type dbtx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// tx runs fn in one write transaction and commits it, or rolls it back on error. Every
// write of the store goes through it: an error that says the database is unavailable is
// marked so here (see unavailable).
func (s *Store) tx(ctx context.Context, op string, fn func(tx dbtx) error) error {
	return s.writeConn(ctx, op, func(c *sql.Conn) error { return fn(c) }, nil)
}

// writeConn runs fn in a transaction on the write connection, once the connection is free
// (or ctx ends), and commits it; ok is told whether the COMMIT returned without an error.
// The transaction's statements run without ctx's cancellation, so that a caller who gives
// up does not leave it half done: it is rolled back or committed whole.
func (s *Store) writeConn(ctx context.Context, op string, fn func(c *sql.Conn) error, ok func(bool)) error {
	select {
	case s.wlock <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("sqlite: %s: begin: %w", op, ctx.Err())
	}
	defer func() { <-s.wlock }()
	if s.closed {
		return fmt.Errorf("sqlite: %s: the store is closed", op)
	}
	if _, err := s.wc.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		// A BEGIN that ctx cut short may have begun the transaction all the same: end it,
		// or the held connection stays inside it and every later write fails to begin.
		_, _ = s.wc.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		return unavailable(fmt.Errorf("sqlite: %s: begin: %w", op, err))
	}
	bg := context.WithoutCancel(ctx)
	if err := fn(s.wc); err != nil {
		_, _ = s.wc.ExecContext(bg, `ROLLBACK`)
		return unavailable(fmt.Errorf("sqlite: %s: %w", op, err))
	}
	if _, err := s.wc.ExecContext(bg, `COMMIT`); err != nil {
		// A COMMIT that failed (the file locked past the busy timeout, a full disk)
		// leaves the transaction open: it is rolled back, and its outcome is reported as
		// unknown to those that keep state about it.
		_, _ = s.wc.ExecContext(bg, `ROLLBACK`)
		if ok != nil {
			ok(false)
		}
		return unavailable(fmt.Errorf("sqlite: %s: commit: %w", op, err))
	}
	if ok != nil {
		ok(true)
	}
	return nil
}

// openDB returns a pool of connections to dsn whose failures to connect are marked as
// unavailable (see unavailable): a file that cannot be opened, a lock held past the busy
// timeout while a connection sets its pragmas.
func openDB(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector{Connector: c, dsn: dsn}), nil
}

// connector is the driver's connector, its errors marked by unavailable.
type connector struct {
	driver.Connector
	dsn string
}

// wrapConn, set only by this package's tests before they open a store, wraps each new
// connection to dsn (to count the statements the store sends).
var wrapConn atomic.Pointer[func(dsn string, c driver.Conn) driver.Conn]

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if wrap := wrapConn.Load(); wrap != nil && err == nil {
		conn = (*wrap)(c.dsn, conn)
	}
	return conn, unavailable(err)
}

// unavailable returns err marked as store.ErrUnavailable when SQLite could not open the
// database file (SQLITE_CANTOPEN) or gave up waiting, after BusyTimeout, for a lock
// another connection holds — another process writing, a backup (SQLITE_BUSY): the
// database's condition, not the request's. Other errors, and nil, are returned as they
// are.
func unavailable(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_CANTOPEN:
			return store.Unavailable(err)
		}
	}
	return err
}

// ts converts a time to the stored form: microseconds since the Unix epoch, 0 for zero.
// uniqueViolation reports whether err is a statement's breach of a unique index, which
// SQLite undid, leaving the transaction as it was before the statement.
func uniqueViolation(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

func ts(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromTS converts a stored timestamp back; 0 is the zero time.
func fromTS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}
