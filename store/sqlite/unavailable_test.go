package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Another process holding the file's lock past the busy timeout makes writes fail with
// store.ErrUnavailable — the database's condition, not the request's — and they work
// again once the lock is released.
func TestLockedPastBusyTimeoutIsUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	p := store.RunInsertParams{Workflow: "w", RunKey: "k", Input: json.RawMessage(`{}`), InputHash: "h",
		Steps: []store.StepInsert{{Name: "s"}}, Actor: "test", Now: time.Now()}
	if _, _, err := s.RunInsert(ctx, p); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("insert while another connection holds the lock: %v, want store.ErrUnavailable", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RunInsert(ctx, p); err != nil {
		t.Fatalf("insert after the lock was released: %v", err)
	}
	// A refusal of the request is not the database's condition.
	p.RunKey = ""
	if _, _, err := s.RunInsert(ctx, p); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("insert of an invalid run: %v", err)
	}
}

// A database file that cannot be opened is unavailable too.
func TestUnopenableFileIsUnavailable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "onceflow.db")
	if err := os.Mkdir(dir, 0o700); err != nil { // a directory where the file should be
		t.Fatal(err)
	}
	_, err := sqlite.Open(context.Background(), dir, sqlite.Options{})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open of a directory: %v, want store.ErrUnavailable", err)
	}
}
