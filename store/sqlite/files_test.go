package sqlite_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// withUmask runs fn under umask mask. The umask is the process's: the test must not be
// parallel (parallel tests run after the sequential ones, never beside them).
func withUmask(mask int, fn func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	fn()
}

// A new database, its -wal and its -shm are readable and writable by their owner only,
// whatever the umask: they hold runs' inputs unmasked.
func TestNewFilesAreReadableByTheOwnerOnly(t *testing.T) {
	for _, mask := range []int{0o022, 0o000, 0o077, 0o277} {
		path := filepath.Join(t.TempDir(), "onceflow.db")
		withUmask(mask, func() {
			s := openStore(t, path, sqlite.Options{})
			// A write, so that SQLite has created the -wal and -shm files.
			if _, err := s.RunInsertMany(t.Context(), []store.RunInsertParams{{Workflow: "w", RunKey: "k", Input: []byte(`{"email":"ana@example.com"}`),
				InputHash: "h", Actor: "test", Now: time.Now(), Steps: []store.StepInsert{{Name: "s"}}}}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatalf("umask %04o: %v", mask, err)
				}
				if mode := fi.Mode().Perm(); mode != 0o600 {
					t.Errorf("umask %04o: %s has mode %04o, want 0600", mask, filepath.Base(p), mode)
				}
			}
		})
	}
}

// Opening a database that others can read logs a warning naming the file, and leaves its
// mode alone; a private one logs nothing.
func TestReadableDatabaseIsWarnedAbout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "onceflow.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	open := func() string {
		t.Helper()
		var logs bytes.Buffer
		s, err := sqlite.Open(t.Context(), path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return logs.String()
	}
	if logs := open(); logs != "" {
		t.Fatalf("a private database logged %q", logs)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := open()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "path="+path) || !strings.Contains(logs, "mode=0644") || !strings.Contains(logs, "chmod 600") {
		t.Fatalf("a database readable by others logged %q, want a warning naming it", logs)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the mode was changed: %v %v", fi.Mode(), err)
	}
}
