package auditgolden

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Compare fails the test unless got equals the golden file at path, showing a diff of
// the lines that differ; with update it writes got to the file instead.
func Compare(t testing.TB, path, got string, update bool, regenerate string) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no golden file %s; write it with %s and read it before committing it", path, regenerate)
	}
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s differs from what the code produces now (- golden, + now); if the change is intended, rewrite it with %s and review the diff:\n%s",
			path, regenerate, Diff(string(want), got))
	}
}

// Diff shows the lines that differ between want and got, with two lines of context, as
// "-" (only in want) and "+" (only in got) lines.
func Diff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// The longest common subsequence, by dynamic programming over the suffixes.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte
		text string
		line int
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i + 1})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', a[i], i + 1})
			i++
		default:
			ops = append(ops, op{'+', b[j], j + 1})
			j++
		}
	}
	const context = 2
	var out strings.Builder
	last := -1
	for k, o := range ops {
		if o.kind == ' ' {
			near := false
			for m := max(0, k-context); m <= min(len(ops)-1, k+context); m++ {
				if ops[m].kind != ' ' {
					near = true
				}
			}
			if !near {
				continue
			}
		}
		if last >= 0 && k > last+1 {
			out.WriteString("…\n")
		}
		if last < 0 || k > last+1 {
			fmt.Fprintf(&out, "@@ line %d\n", o.line)
		}
		fmt.Fprintf(&out, "%c %s\n", o.kind, o.text)
		last = k
	}
	return out.String()
}
