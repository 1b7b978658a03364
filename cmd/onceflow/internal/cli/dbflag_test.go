package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The --help of every command that takes --db says that a password given there shows in
// the process list and names ONCEFLOW_DB; the default it shows from ONCEFLOW_DB has its
// password masked.
func TestDBFlagHelpWarnsAboutPasswords(t *testing.T) {
	t.Setenv("ONCEFLOW_DB", "postgres://onceflow:pw-s3cr3t-42@db.internal:5432/onceflow?schema=ops")
	for _, cmd := range [][]string{{"serve"}, {"worker"}, {"migrate"}, {"runs", "list"}, {"runs", "show"}, {"review", "list"},
		{"audit"}, {"keys", "show"}, {"purge"}, {"pause"}, {"schedules", "trigger"}, {"demo"}, {"bench"}} {
		r := runOK(t, append(cmd, "--help")...)
		if !strings.Contains(r.stdout, "--db") {
			t.Fatalf("onceflow %s --help shows no --db:\n%s", strings.Join(cmd, " "), r.stdout)
		}
		if !strings.Contains(r.stdout, "process list") || !strings.Contains(r.stdout, "put the URL in ONCEFLOW_DB") {
			t.Errorf("onceflow %s --help does not warn about a password in --db:\n%s", strings.Join(cmd, " "), r.stdout)
		}
		if strings.Contains(r.stdout, "pw-s3cr3t-42") {
			t.Errorf("onceflow %s --help prints the password of ONCEFLOW_DB:\n%s", strings.Join(cmd, " "), r.stdout)
		}
	}
}

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
