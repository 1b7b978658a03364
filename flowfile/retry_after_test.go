package flowfile

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// retry.max_retry_after of a file is the step's cap: a 2 min Retry-After is honoured under
// the default cap (1h) and sends the step to review under a 1 min one.
func TestMaxRetryAfterFromTheFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	defs, err := readerWith(t, stdsteps.Options{AllowNet: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).LoadFiles(write(t, "w.yaml", `name: w
steps:
  - id: patient
    kind: http
    http: {url: "{env.DEST}/a"}
  - id: impatient
    kind: http
    retry: {max_retry_after: 1m}
    http: {url: "{env.DEST}/b"}
`))
	if err != nil {
		t.Fatal(err)
	}
	wfs, err := NewBuilder(BuildOptions{Env: func(k string) (string, bool) { return srv.URL, k == "DEST" }}).Workflows(defs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(wfs[0]); err != nil {
		t.Fatal(err)
	}
	run, err := c.Start(ctx, "w", "1", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Work(ctx); err != nil {
		t.Fatal(err)
	}
	steps, err := st.StepListByRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range steps {
		got[s.Name] = string(s.State) + " " + string(s.Reason)
	}
	if got["patient"] != "retrying retryable_error" || got["impatient"] != "needs_review "+string(store.ReasonRetryAfterTooLong) {
		t.Fatalf("steps after a 2 min Retry-After: %v; want patient retrying (default cap 1h), impatient in review (cap 1m)", got)
	}
}
