package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// envVar is one NAME=VALUE line of an environment file.
type envVar struct {
	Name, Value string
	Line        int
}

// readEnvFile reads an environment file: one NAME=VALUE a line, optionally after
// "export "; blank lines and lines starting with # are skipped. A value is taken as
// written, without its surrounding blanks, or between a pair of quotes: '…' exactly as
// written, "…" with \" \\ and \n read as ", \ and a newline. Nothing else is interpreted —
// no $VARIABLE, no comment after a value. A line that is none of these, a name that is not
// a variable name, or a name set twice is an error naming the file and the line, and
// nothing of the file is used.
func readEnvFile(path string) ([]envVar, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--env-file: %v", err)
	}
	var vars []envVar
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		bad := func(format string, args ...any) error {
			return usagef("%s:%d: %s", path, n, fmt.Sprintf(format, args...))
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, bad("the line is not NAME=VALUE (it has no =)") // not quoted: it may be a pasted secret
		}
		if !envName(name) {
			return nil, bad("%q is not a variable name (letters, digits and _, not starting with a digit)", clip(name, 40))
		}
		if first, dup := seen[name]; dup {
			return nil, bad("%s is set already on line %d", name, first)
		}
		value = strings.TrimSpace(value)
		if value, err = envValue(value); err != nil {
			return nil, bad("%s: %v", name, err)
		}
		seen[name] = n
		vars = append(vars, envVar{Name: name, Value: value, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("--env-file %s: %v", path, err)
	}
	return vars, nil
}

func envName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// envValue reads a value as written after the =: bare, '…' or "…".
func envValue(v string) (string, error) {
	if v == "" || (v[0] != '"' && v[0] != '\'') {
		return v, nil
	}
	q := v[0]
	if len(v) < 2 || v[len(v)-1] != q {
		return "", fmt.Errorf("the value opens a %c quote that does not close at the end of the line", q)
	}
	body := v[1 : len(v)-1]
	if q == '\'' {
		if strings.ContainsRune(body, '\'') {
			return "", fmt.Errorf("a '…' value cannot hold a ' (use \"…\")")
		}
		return body, nil
	}
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\\' && i+1 < len(body):
			i++
			switch body[i] {
			case '"', '\\':
				b.WriteByte(body[i])
			case 'n':
				b.WriteByte('\n')
			default:
				return "", fmt.Errorf("\\%c is not an escape of a \"…\" value (\\\" \\\\ and \\n are)", body[i])
			}
		case c == '\\':
			return "", fmt.Errorf("the value ends in a lone \\")
		case c == '"':
			return "", fmt.Errorf("a \" inside a \"…\" value must be written \\\"")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// applyEnvFile sets the variables of the file --env-file names (none without one), the
// whole file checked first: a variable already set in the environment keeps its value,
// so that NAME=value onceflow serve … overrides the file for one start. ONCEFLOW_DB from
// the file is the database unless --db was given. It returns the names it set.
func (g *globals) applyEnvFile(cmd *cobra.Command, path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	vars, err := readEnvFile(path)
	if err != nil {
		return nil, err
	}
	var set []string
	for _, v := range vars {
		if _, ok := os.LookupEnv(v.Name); ok {
			continue
		}
		if err := os.Setenv(v.Name, v.Value); err != nil {
			return set, fmt.Errorf("--env-file %s:%d: %s: %w", path, v.Line, v.Name, err)
		}
		set = append(set, v.Name)
	}
	if db := os.Getenv("ONCEFLOW_DB"); db != "" && !cmd.Flags().Changed("db") {
		g.db = db
	}
	return set, nil
}
