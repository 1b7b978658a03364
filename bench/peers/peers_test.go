package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"
)

// TestCompare runs both sides with a few hundred jobs against the PostgreSQL database
// named by ONCEFLOW_TEST_POSTGRES_URL, checks that each side completed every job, and
// that the schemas are gone afterwards.
func TestCompare(t *testing.T) {
	url := os.Getenv("ONCEFLOW_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("set ONCEFLOW_TEST_POSTGRES_URL to a PostgreSQL database to run the peer comparison")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := compare(ctx, options{DB: url, Jobs: 200, Concurrency: 4, Workers: 10, Rounds: 2, Timeout: time.Minute, Batch: 30}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 {
		t.Fatalf("got %d rounds, want 2", len(rep.Rounds))
	}
	if rep.RiverJobsPerSec <= 0 || rep.OnceflowStepsPerS <= 0 || rep.Ratio <= 0 {
		t.Fatalf("figures not positive: %+v", rep)
	}
	if rep.Batch != 30 || rep.RiverBatchJobsPerSec <= 0 || rep.OnceflowBatchStepsPerS <= 0 || rep.BatchRatio <= 0 {
		t.Fatalf("batch figures not positive: %+v", rep)
	}
	if rep.RiverVersion == "unknown" {
		t.Errorf("River's version is unknown")
	}
	t.Logf("River %.0f jobs/s, onceflow %.0f steps/s, ratio %.2f", rep.RiverJobsPerSec, rep.OnceflowStepsPerS, rep.Ratio)

	conn, err := connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, rd := range rep.Rounds {
		if rd.RiverBatch == nil || rd.OnceflowBatch == nil {
			t.Fatalf("round %d has no batch rows", rd.Round)
		}
		for _, schema := range []string{rd.River.Schema, rd.Onceflow.Schema, rd.RiverBatch.Schema, rd.OnceflowBatch.Schema} {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("schema %s was not dropped", schema)
			}
		}
	}
}

func TestWithPoolConns(t *testing.T) {
	for _, tc := range []struct {
		url  string
		n    int
		want string
	}{
		{"postgres://h/db", 0, "postgres://h/db"},
		{"postgres://h/db", 20, "postgres://h/db?pool_max_conns=20"},
		{"postgres://h/db?sslmode=disable", 20, "postgres://h/db?sslmode=disable&pool_max_conns=20"},
		{"host=h dbname=db", 8, "host=h dbname=db pool_max_conns=8"},
	} {
		if got := withPoolConns(tc.url, tc.n); got != tc.want {
			t.Errorf("withPoolConns(%q, %d) = %q, want %q", tc.url, tc.n, got, tc.want)
		}
	}
}
