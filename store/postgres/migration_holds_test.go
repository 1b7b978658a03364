package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Migration 0011 ends the holds an unbounded Retry-After left on a destination (a 429
// asking for centuries held the host back until 2318) and keeps holds within a day.
func TestMigrationEndsUnboundedDestinationHolds(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	conn, err := pgx.Connect(t.Context(), testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), fmt.Sprintf(sql, pgx.Identifier{schema}.Sanitize()), args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	q(`INSERT INTO %s.destination_buckets (destination, tokens, updated_at, blocked_until) VALUES
		('held-for-centuries', 1, now(), '2318-01-01'), ('held-for-an-hour', 1, now(), now() + interval '1 hour')`)
	// Apply 0011 again, as on a database that was written by the old code.
	q(`DELETE FROM %s.schema_migrations WHERE version = 11`)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), fmt.Sprintf(`SELECT destination, blocked_until - now() FROM %s.destination_buckets ORDER BY destination`,
		pgx.Identifier{schema}.Sanitize()))
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]time.Duration{}
	for rows.Next() {
		var d string
		var until time.Duration
		if err := rows.Scan(&d, &until); err != nil {
			t.Fatal(err)
		}
		left[d] = until
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if l := left["held-for-centuries"]; l > time.Minute {
		t.Errorf("the hold until 2318 is left with %v to run, want it ended", l)
	}
	if l := left["held-for-an-hour"]; l < 50*time.Minute || l > time.Hour {
		t.Errorf("the hold of an hour has %v left, want it kept", l)
	}
}
