package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Target is where scenarios create their databases: new SQLite files in a directory, or
// new schemas in a PostgreSQL database. Every database a scenario creates is removed (or
// its schema dropped) when the scenario ends; nothing that existed before is opened.
type Target struct {
	// PostgresURL, when set, names the PostgreSQL database in which each scenario creates
	// a schema of its own, onceflow_bench_<random>, and drops it at the end.
	PostgresURL string
	// SQLiteDir is the directory that receives the SQLite files, otherwise.
	SQLiteDir string
	// SQLiteName is the files' base name and extension: "bench.db" gives bench-steps.db,
	// bench-ledger-empty.db… (default "bench.db").
	SQLiteName string
}

// Kind returns "postgres" or "sqlite".
func (t Target) Kind() string {
	if t.PostgresURL != "" {
		return "postgres"
	}
	return "sqlite"
}

// database is one fresh database of a scenario.
type database struct {
	kind string
	// path is the SQLite file.
	path string
	// url and schema locate the PostgreSQL schema.
	url, schema string

	st store.Store
}

// fresh returns a new, empty database named after label, not yet opened.
func (t Target) fresh(label string) (*database, error) {
	if t.PostgresURL != "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		return &database{kind: "postgres", url: t.PostgresURL, schema: "onceflow_bench_" + hex.EncodeToString(b[:])}, nil
	}
	name := t.SQLiteName
	if name == "" {
		name = "bench.db"
	}
	ext := filepath.Ext(name)
	path := filepath.Join(t.SQLiteDir, name[:len(name)-len(ext)]+"-"+label+ext)
	for _, p := range sqliteFiles(path) {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%s already exists; bench only creates new databases and will not open it", p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return &database{kind: "sqlite", path: path}, nil
}

// sqliteFiles returns the database file and the files SQLite keeps beside it.
func sqliteFiles(path string) []string {
	return []string{path, path + "-wal", path + "-shm", path + "-journal"}
}

// open opens the store on the database, creating its tables.
func (d *database) open(ctx context.Context) error {
	if d.st != nil {
		return nil
	}
	var err error
	if d.kind == "postgres" {
		d.st, err = postgres.Open(ctx, d.url, postgres.Options{Schema: d.schema})
	} else {
		d.st, err = sqlite.Open(ctx, d.path, sqlite.Options{})
	}
	if err != nil {
		d.st = nil
		return err
	}
	return nil
}

// closeStore closes the store, keeping the database.
func (d *database) closeStore() error {
	if d.st == nil {
		return nil
	}
	err := d.st.Close()
	d.st = nil
	return err
}

// remove closes the store and deletes the database: the SQLite files, or the schema with
// everything in it. It runs even after ctx ended.
func (d *database) remove(ctx context.Context) error {
	err := d.closeStore()
	if d.kind == "postgres" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		conn, cerr := connectPostgres(ctx, d.url, "")
		if cerr != nil {
			return errors.Join(err, fmt.Errorf("drop schema %s: %w", d.schema, cerr))
		}
		defer conn.Close(ctx)
		if _, xerr := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{d.schema}.Sanitize()+" CASCADE"); xerr != nil {
			err = errors.Join(err, fmt.Errorf("drop schema %s: %w", d.schema, xerr))
		}
		return err
	}
	for _, p := range sqliteFiles(d.path) {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// withDatabase runs fn on a fresh database named label, opened, and removes it afterwards.
func withDatabase(ctx context.Context, t Target, label string, fn func(d *database) error) (err error) {
	d, err := t.fresh(label)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := d.remove(ctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove the bench database: %w", rerr))
		}
	}()
	if err := d.open(ctx); err != nil {
		return err
	}
	return fn(d)
}
