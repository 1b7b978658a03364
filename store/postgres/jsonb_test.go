package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// TestJSONBText: a derived event's detail, built by Go's encoder and printed as jsonb
// prints it, is byte for byte what PostgreSQL returns for the same detail stored in a
// jsonb column: keys by length then bytes, spaces after colons and commas, <, >, & and
// the line separators raw, control characters and quotes escaped.
func TestJSONBText(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	lease := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	details := []map[string]any{
		nil,
		{"worker": "w1", "lease_expires_at": lease},
		{"worker": "golden-worker", "lease_expires_at": lease, "previous_outcome": "unknown"},
		{"run_key": "order-1", "steps": 3},
		{"from": "pending", "to": "processing"},
		{"outcome": "success", "response_status": 200, "error": `a "quoted" <b>&</b> \ back\slash`},
		{"error": "line\nbreak\ttab\r\b\f\x01\x1f end \u2028 \u2029 é 日本 🎉 \u00ad", "a": "", "bb": "x", "ccc": -1},
		{"Z": 1, "a": 2, "AA": 3, "aa": 4, "b": 0},
		{"k": "\u007f \u0080 \ufffd"},
	}
	for _, d := range details {
		enc := store.EncodeDetail(d)
		var want string
		if err := conn.QueryRow(context.Background(), `SELECT $1::jsonb::text`, string(enc)).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := string(postgres.JSONBText(enc)); got != want {
			t.Errorf("jsonbText(%s) =\n  %s\nwant\n  %s", enc, got, want)
		}
	}
	// Arrays and nested objects, which details may hold.
	for _, s := range []string{`{"a": [1, "x", {"b": null, "aa": true}], "n": [], "o": {}}`, `[]`, `"s"`} {
		var want string
		if err := conn.QueryRow(context.Background(), `SELECT $1::jsonb::text`, s).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := string(postgres.JSONBText(json.RawMessage(s))); got != want {
			t.Errorf("jsonbText(%s) = %s, want %s", s, got, want)
		}
	}
}
