package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A SQLite database the commands create is the owner's only; one that others can read is
// named in a warning on stderr by every command that opens it.
func TestCommandsWarnAboutAReadableDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	runOK(t, "migrate", "--db", "sqlite://"+path)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("migrate created %s with mode %v (%v), want 0600", path, fi.Mode(), err)
	}
	f := setup(t)
	file := strings.TrimPrefix(f.db, "sqlite://")
	if r := runOK(t, "runs", "list", "--db", f.db); r.stderr != "" {
		t.Fatalf("a private database: stderr %q", r.stderr)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runOK(t, "runs", "list", "--db", f.db)
	if !strings.Contains(r.stderr, "can be read by other users") || !strings.Contains(r.stderr, file) || !strings.Contains(r.stderr, "chmod 600") {
		t.Fatalf("runs list on a database others can read: stderr %q, want a warning naming %s", r.stderr, file)
	}
}
