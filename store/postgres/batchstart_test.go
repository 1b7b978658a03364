package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// A batch start whose COMMIT fails acknowledges nothing: through a proxy that keeps the
// batch's COMMIT from the database (its statements answered, the transaction rolled back)
// StartMany returns an error and POST …/runs:batch a 5xx, and nothing is stored; when the
// COMMIT reaches the database but its answer is lost, the batch is stored and still not
// acknowledged. The same batch sent again is then answered item by item — created, or
// duplicates of the runs stored — with one run per key.
func TestBatchStartCommitFaults(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	schema := newSchema(t)
	direct := openStore(t, schema) // creates the schema, and reads it without the proxy
	proxy := newFaultProxy(t, u.Host)
	proxied := *u
	proxied.Host = proxy.ln.Addr().String()
	ctx := t.Context()
	s, err := postgres.Open(ctx, proxied.String(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := onceflow.New(onceflow.Config{Store: s, WorkerID: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(onceflow.Workflow{Name: "leads", Entity: "lead:{input.id}", Steps: []onceflow.Step{{ID: "crm",
		Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}); err != nil {
		t.Fatal(err)
	}
	const secret = "batch-token-0123456789"
	srv, err := onceflowhttp.NewHandler(c, onceflowhttp.Options{Tokens: []onceflowhttp.Token{{Name: "importer", Secret: secret,
		Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeIngest}}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	stored := func(prefix string, n int) map[string]int64 {
		t.Helper()
		ids := map[string]int64{}
		for i := range n {
			r, err := direct.RunGetByKey(ctx, "leads", fmt.Sprintf("%s-%d", prefix, i))
			switch {
			case err == nil:
				ids[r.RunKey] = r.ID
			case !errors.Is(err, store.ErrNotFound):
				t.Fatal(err)
			}
		}
		return ids
	}

	// The library: a held COMMIT fails the call, and nothing is stored.
	items := []onceflow.StartItem{{RunKey: "lib-0", Input: map[string]any{"id": 0}}, {RunKey: "lib-1", Input: map[string]any{"id": 1}}}
	proxy.holdCommits.Store(1)
	res, err := c.StartMany(ctx, "leads", items)
	if proxy.held.Load() != 1 {
		t.Fatalf("the proxy held %d COMMITs, want StartMany's", proxy.held.Load())
	}
	if err == nil {
		t.Fatalf("StartMany whose COMMIT never reached the database returned %+v, no error", res)
	}
	if ids := stored("lib", 2); len(ids) != 0 {
		t.Fatalf("runs %v stored, although their COMMIT never reached the database", ids)
	}
	if res, err = c.StartMany(ctx, "leads", items); err != nil || res[0].Status != onceflow.StartCreated || res[1].Status != onceflow.StartCreated {
		t.Fatalf("StartMany again: %+v, %v; want both created", res, err)
	}

	// The API: nothing is acknowledged before it is durable.
	var body strings.Builder
	body.WriteString(`{"items": [`)
	for i := range 5 {
		if i > 0 {
			body.WriteString(", ")
		}
		fmt.Fprintf(&body, `{"idempotency_key": "api-%d", "input": {"id": %d}}`, i, i)
	}
	body.WriteString(`]}`)
	post := func() (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", hs.URL+"/v1/workflows/leads/runs:batch", strings.NewReader(body.String()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	proxy.holdCommits.Store(1)
	if status, answer := post(); status < 500 {
		t.Fatalf("a batch whose COMMIT never reached the database: %d %s, want a 5xx", status, answer)
	}
	if ids := stored("api", 5); len(ids) != 0 {
		t.Fatalf("runs %v stored, although their COMMIT never reached the database", ids)
	}
	proxy.loseAnswers.Store(1)
	if status, answer := post(); status < 500 {
		t.Fatalf("a batch whose COMMIT's answer was lost: %d %s, want a 5xx (committed, but not known to be)", status, answer)
	}
	before := stored("api", 5)
	if len(before) != 5 {
		t.Fatalf("after the lost answer, runs %v are stored; want all five (the COMMIT reached the database)", before)
	}
	status, answer := post()
	if status != http.StatusOK {
		t.Fatalf("the batch again: %d %s, want 200", status, answer)
	}
	var out struct {
		Results []struct {
			Status string `json:"status"`
			Run    struct {
				ID     int64  `json:"id"`
				RunKey string `json:"run_key"`
			} `json:"run"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(answer), &out); err != nil || len(out.Results) != 5 {
		t.Fatalf("answer %s: %v", answer, err)
	}
	for i, r := range out.Results {
		if r.Status != "duplicate" || r.Run.ID != before[r.Run.RunKey] || r.Run.RunKey != fmt.Sprintf("api-%d", i) {
			t.Errorf("item %d: %+v, want the duplicate of run %d", i, r, before[fmt.Sprintf("api-%d", i)])
		}
	}
	if after := stored("api", 5); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("runs after the batch again: %v, want %v", after, before)
	}
}
