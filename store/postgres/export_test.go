package postgres

import "github.com/jackc/pgx/v5"

// SetQueryTracer makes the stores opened from now on trace their connections' queries with
// tr (nil: none). A test that sets it must not run in parallel with others.
func SetQueryTracer(tr pgx.QueryTracer) { testTracer = tr }

// JSONBText is jsonbText, for the tests of package postgres_test.
func JSONBText(b []byte) []byte { return jsonbText(b) }
