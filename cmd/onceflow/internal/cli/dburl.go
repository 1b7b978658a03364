package cli

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// defaultDB is the database the commands use when neither --db nor ONCEFLOW_DB says otherwise.
const defaultDB = "sqlite://./onceflow.db"

// acceptedDBForms is shown whenever a --db value cannot be used.
const acceptedDBForms = "sqlite:///abs/path.db, sqlite://./rel.db, sqlite://rel.db, a plain file path, or postgres://user:password@host:5432/db[?schema=name]"

// dbLocation is a parsed --db value.
type dbLocation struct {
	// Scheme is the backend: "sqlite" or "postgres".
	Scheme string
	// Path is the SQLite file, as given (relative paths stay relative).
	Path string
	// ConnString is the PostgreSQL connection URL without onceflow's own parameters, and
	// Schema the schema named by ?schema= ("" for the connection's default).
	ConnString string
	Schema     string
}

// URL returns the location in a form that works from any directory and may be printed: a
// sqlite:// URL with an absolute path, or the postgres:// URL with its password masked.
func (l dbLocation) URL() string {
	if l.Scheme == "postgres" {
		u, err := url.Parse(l.ConnString)
		if err != nil {
			return "postgres://…"
		}
		if l.Schema != "" {
			q := u.Query()
			q.Set("schema", l.Schema)
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	p := l.Path
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return "sqlite://" + filepath.ToSlash(p)
}

// maskPassword returns a --db value with the password of a URL masked, for --help.
func maskPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return "(from ONCEFLOW_DB)" // not a URL, but it may hold a password: show nothing
		}
		return s
	}
	return u.Redacted()
}

// parseDBURL turns a --db value into a location. It accepts sqlite:///abs/path.db,
// sqlite://./rel.db, sqlite://rel.db and a bare file path.
func parseDBURL(s string) (dbLocation, error) {
	if strings.TrimSpace(s) == "" {
		return dbLocation{}, fmt.Errorf("--db is empty; use %s", acceptedDBForms)
	}
	scheme, rest, hasScheme := strings.Cut(s, "://")
	if !hasScheme {
		// A bare path, unless it looks like a URL written without the slashes
		// ("sqlite:x.db", "postgres:...").
		if before, _, ok := strings.Cut(s, ":"); ok && isScheme(before) && len(before) > 1 {
			return dbLocation{}, schemeError(before, s)
		}
		return checkPath(s, s)
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3":
		return checkPath(rest, s)
	case "postgres", "postgresql":
		return parsePostgres(s)
	default:
		return dbLocation{}, schemeError(scheme, s)
	}
}

// parsePostgres takes onceflow's own ?schema= parameter off a PostgreSQL URL.
func parsePostgres(s string) (dbLocation, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return dbLocation{}, fmt.Errorf("--db: not a PostgreSQL URL; write postgres://user:password@host:5432/database")
	}
	q := u.Query()
	schema := q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	if schema != "" && !validSchema(schema) {
		return dbLocation{}, fmt.Errorf("--db: schema %q must be lowercase letters, digits and '_', starting with a letter", schema)
	}
	return dbLocation{Scheme: "postgres", ConnString: u.String(), Schema: schema}, nil
}

func validSchema(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return len(s) <= 63
}

func schemeError(scheme, s string) error {
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return fmt.Errorf("--db %q: write postgres:// followed by the address", s)
	case "sqlite", "sqlite3":
		return fmt.Errorf("--db %q: write sqlite:// followed by the path; accepted forms are %s", s, acceptedDBForms)
	}
	return fmt.Errorf("--db %q: unsupported database %q; accepted forms are %s", s, scheme, acceptedDBForms)
}

// checkPath validates the file path part of a --db value.
func checkPath(p, s string) (dbLocation, error) {
	switch {
	case p == "":
		return dbLocation{}, fmt.Errorf("--db %q names no file; accepted forms are %s", s, acceptedDBForms)
	case strings.ContainsAny(p, "?#"):
		return dbLocation{}, fmt.Errorf("--db %q: options after '?' or '#' are not supported; give only the file path", s)
	case strings.HasSuffix(p, "/"):
		return dbLocation{}, fmt.Errorf("--db %q names a directory; name the database file, such as %sonceflow.db", s, s)
	}
	return dbLocation{Scheme: "sqlite", Path: p}, nil
}

// isScheme reports whether s has the shape of a URL scheme (RFC 3986: a letter followed by
// letters, digits, '+', '-' or '.').
func isScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}
