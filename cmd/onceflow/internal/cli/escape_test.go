package cli

import (
	"database/sql"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// hostile writes into the fixture's rows, as rows stored before the identifier rules (or
// text from a destination) may hold them, terminal escapes (clear the screen, set the
// window title, hide text), a newline and a tab that would forge a line or a column, and
// bidi and zero-width characters.
func hostile(t *testing.T, f fixture) {
	t.Helper()
	db, err := sql.Open("sqlite", strings.TrimPrefix(f.db, "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		// The store keeps the rows that audit events are derived from as they were written
		// (triggers refuse such an update); these rows are edited by hand, as rows written
		// before the identifier rules are stored, so the triggers go first.
		{"DROP TRIGGER runs_creation_once", nil},
		{"DROP TRIGGER attempts_write_once", nil},
		{"UPDATE runs SET run_key = ?, entity = ?", []any{"evt-1001\x1b]0;pwned\x07", "order:1001\nforged-line 99\tcompleted"}},
		{"UPDATE steps SET last_error = ? WHERE name = 'charge'", []any{"card declined\x1b[2J\u202eevil\nforged-line error"}},
		{"UPDATE steps SET effect_key = ? WHERE name = 'charge'", []any{"charge:\x1b[31m1001\u200b"}},
		{"UPDATE attempts SET error = ?, worker = ?", []any{"\x1b[8mhidden\x1b[0m boom", "worker\x1b[1m\u2066"}},
		{"INSERT INTO events (at, type, run_id, workflow, entity, actor, reason, detail) SELECT 1, 'review.noted', id, workflow, entity, ?, ?, ? FROM runs",
			[]any{"ops\x1b[2K\rforged-line actor", "note\u202e\x00", `{"note":"\u001b[2J"}`}},
	} {
		if _, err := db.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
}

// checkPrintable fails when out holds a character a terminal acts on or that cannot be
// seen (only line breaks are the command's own), or a line a stored string forged.
func checkPrintable(t *testing.T, what, out string) {
	t.Helper()
	for i, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)) {
			t.Errorf("%s prints %U raw at byte %d: %q", what, r, i, out[max(0, i-40):min(len(out), i+40)])
			return
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "forged-line") {
			t.Errorf("%s prints a line a stored string forged: %q", what, line)
		}
	}
}

// Every human-readable printer escapes what it prints from the database: runs list and
// show, review list and show, audit by run and by entity, keys show.
func TestPrintersEscapeStoredText(t *testing.T) {
	t.Parallel()
	f := setup(t)
	hostile(t, f)
	id := fmt.Sprint(f.runID)
	for _, args := range [][]string{
		{"runs", "list"},
		{"runs", "show", id},
		{"review", "list"},
		{"review", "show", id, "charge"},
		{"audit", "--run", id},
		{"audit", "--entity", "order:1001\nforged-line 99\tcompleted"},
		{"keys", "show", "notify:1001"},
	} {
		r := run(t, append(args, "--db", f.db)...)
		if r.code != 0 && !(args[0] == "keys" && r.code == keyCompleted) {
			t.Fatalf("onceflow %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		checkPrintable(t, "onceflow "+strings.Join(args, " "), r.stdout+r.stderr)
		if !strings.Contains(r.stdout, `\x1b`) && args[0] != "keys" {
			t.Errorf("onceflow %s shows no escaped ESC: %s", strings.Join(args, " "), r.stdout)
		}
	}
	// An error that quotes what it was given is escaped too.
	r := run(t, "runs", "show", "1\x1b[2J", "--db", f.db)
	checkPrintable(t, "an error", r.stderr)
}

// Every printer of the package goes through outf, outln or out: nothing else in it calls
// fmt.Fprint, Fprintf or Fprintln, so that a printer added later escapes what it prints.
func TestPrintersUseTheEscapingFunctions(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || file == "text.go" {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Fprint") {
				t.Errorf("%s: fmt.%s writes unescaped output; use outf, outln or out", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Print") {
				t.Errorf("%s: fmt.%s writes unescaped output; use outf, outln or out", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
