package onceflowhttp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// /readyz says where the engine's time comes from: the database's clock on PostgreSQL,
// with this machine's skew from it (a clock 90 s ahead shows "+90.0s"); this machine's on
// SQLite; the configured clock as it is with ClockSync negative.
func TestReadyShowsTheClock(t *testing.T) {
	ctx := context.Background()
	u, schema := testsvc.PostgresSchema(t, "onceflow_http_")
	pg, err := postgres.Open(ctx, u, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	ahead := func() time.Time { return time.Now().Add(90 * time.Second) }
	for _, tc := range []struct {
		name string
		cfg  onceflow.Config
		want map[string]string
	}{
		{"postgres", onceflow.Config{Store: pg, Clock: ahead}, map[string]string{"source": "database", "skew": "+90.0s"}},
		{"sqlite", onceflow.Config{Store: lite, Clock: ahead}, map[string]string{"source": "local"}},
		{"as configured", onceflow.Config{Store: pg, Clock: ahead, ClockSync: -1}, map[string]string{"source": "config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := onceflow.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			h, err := NewHandler(c, Options{})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(checked(t, h))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var got struct {
				Status string            `json:"status"`
				Clock  map[string]string `json:"clock"`
			}
			if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != http.StatusOK || got.Status != "ready" {
				t.Fatalf("GET /readyz: %d %s (%v)", resp.StatusCode, body, err)
			}
			if len(got.Clock) != len(tc.want) {
				t.Fatalf("clock %v, want %v", got.Clock, tc.want)
			}
			for k, v := range tc.want {
				if got.Clock[k] != v {
					t.Fatalf("clock %v, want %v", got.Clock, tc.want)
				}
			}
		})
	}
}
