package onceflowui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/apicheck"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Planted in the run's input: the console must show neither.
const (
	canarySecret = "canary-secret-7f3a9e21c4"
	canaryPII    = "canary-pii-ada@example.com"
)

const (
	readSecret  = "read-token-0123456789abcdef"
	adminSecret = "admin-token-fedcba9876543210"
)

// destination is a counting HTTP service: POST /create answers an id, POST /notify
// refuses a phone number without a leading + with a 422 that repeats the request.
type destination struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int
	// last holds the body of the latest request by path.
	last map[string]string
	// gate, when set, holds every /notify request until it is closed.
	gate chan struct{}
}

// hold makes /notify requests wait until the returned func is called.
func (d *destination) hold() (release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := make(chan struct{})
	d.gate = g
	return func() { close(g) }
}

func newDestination(t *testing.T) *destination {
	d := &destination{n: map[string]int{}, last: map[string]string{}}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.n[r.URL.Path]++
		d.last[r.URL.Path] = string(body)
		gate := d.gate
		d.mu.Unlock()
		if gate != nil && r.URL.Path == "/notify" {
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		}
		var in struct {
			Phone string `json:"phone"`
		}
		_ = json.Unmarshal(body, &in)
		switch {
		case r.URL.Path == "/notify" && (len(in.Phone) == 0 || in.Phone[0] != '+'):
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"error":"invalid phone number","request":%s}`, body)
		default:
			fmt.Fprint(w, `{"id":77}`)
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *destination) count(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[path]
}

// lastBody is the body of the latest request to path.
func (d *destination) lastBody(path string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last[path]
}

// post sends body to path; a 4xx is permanent, the answer's body part of the error.
func (d *destination) post(ctx context.Context, path string, body any) (json.RawMessage, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.srv.URL+path, bytes.NewReader(b))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		return nil, onceflow.PermanentError(fmt.Errorf("%s answered %d: %s", path, resp.StatusCode, out))
	}
	return out, nil
}

// bundle is what a console test needs.
type bundle struct {
	t      *testing.T
	store  store.Store
	client *onceflow.Client
	dest   *destination
	srv    *httptest.Server
	runID  int64
	// path is the SQLite file of the store ("" on PostgreSQL).
	path string
	// api is the JSON API over the same client, store, tokens and redaction; every request
	// made to it, and its answer, is checked against the OpenAPI document.
	api *httptest.Server
}

// openStore opens a new, empty store of backend: a SQLite file, or a schema of its own in
// the PostgreSQL database of ONCEFLOW_TEST_POSTGRES_URL (skipped without it, failed under
// CI=true), dropped when the test ends.
func openStore(t *testing.T, backend string) (store.Store, string) {
	t.Helper()
	ctx := t.Context()
	if backend == "sqlite" {
		path := filepath.Join(t.TempDir(), "onceflow.db")
		st, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, path
	}
	u, schema := testsvc.PostgresSchema(t, "onceflowui_test_")
	st, err := postgres.Open(ctx, u, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return st, ""
}

// eachStore runs f on a bundle over SQLite and one over PostgreSQL.
func eachStore(t *testing.T, f func(t *testing.T, b *bundle)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) { f(t, setupOn(t, backend)) })
	}
}

func setup(t *testing.T) *bundle { return setupOn(t, "sqlite") }

// setupOn starts a store of backend, a client with the workflow signup (create, then notify
// and task, which need create), one run whose notify step is parked in review
// (permanent_error: the phone number lacks a +) and whose task completed, and the console
// on an httptest server.
func setupOn(t *testing.T, backend string) *bundle {
	t.Helper()
	ctx := t.Context()
	st, path := openStore(t, backend)
	dest := newDestination(t)
	client, err := onceflow.New(onceflow.Config{Store: st, Workers: 2, PollInterval: 20 * time.Millisecond,
		Redact: onceflow.Redaction{Secrets: []string{canarySecret}}})
	if err != nil {
		t.Fatal(err)
	}
	type input struct {
		CustomerID string `json:"customer_id"`
		Phone      string `json:"phone"`
		Name       string `json:"name"`
	}
	err = client.Register(onceflow.Workflow{
		Name:   "signup",
		Entity: "customer:{input.customer_id}",
		Redact: []string{"email"},
		Steps: []onceflow.Step{
			{ID: "create", EffectKey: "crm-create:{input.customer_id}", Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				var in input
				if err := sc.DecodeInput(&in); err != nil {
					return nil, err
				}
				return dest.post(ctx, "/create", map[string]string{"customer": in.CustomerID})
			}},
			{ID: "notify", Needs: []string{"create"}, EffectKey: "sms-welcome:{input.customer_id}", Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				var in input
				if err := sc.DecodeInput(&in); err != nil {
					return nil, err
				}
				msg := map[string]string{"phone": in.Phone}
				if in.Name != "" {
					msg["name"] = in.Name
				}
				return dest.post(ctx, "/notify", msg)
			}},
			{ID: "task", Needs: []string{"create"}, EffectKey: "sales-task:{input.customer_id}", Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				var in input
				if err := sc.DecodeInput(&in); err != nil {
					return nil, err
				}
				return dest.post(ctx, "/task", map[string]string{"customer": in.CustomerID})
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	run, err := client.Start(ctx, "signup", "evt-1001", map[string]any{"customer_id": "c-1001", "phone": "4915112345",
		"email": canaryPII, "memo": "api token " + canarySecret})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{t: t, store: st, path: path, client: client, dest: dest, runID: run.ID}
	b.waitFor("notify parked and task completed", func() bool {
		if _, err := client.Work(ctx); err != nil {
			t.Fatal(err)
		}
		it, err := client.ReviewGet(ctx, run.ID, "notify")
		task, terr := client.ReviewGet(ctx, run.ID, "task")
		return err == nil && terr == nil && it.State == store.StateNeedsReview && task.State == store.StateCompleted
	})

	tokens, err := onceflowhttp.ParseTokens("viewer:read:" + readSecret + ",ops:admin:" + adminSecret + ",form:ingest:ingest-token-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	b.srv = httptest.NewServer(newConsole(t, onceflowui.Config{Client: client, Tokens: tokens}))
	t.Cleanup(b.srv.Close)
	api, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	b.api = httptest.NewServer(apiChecker(t).Handler(api, func(err error) { t.Errorf("OpenAPI document: %v", err) }))
	t.Cleanup(b.api.Close)
	return b
}

var (
	checkerOnce sync.Once
	checker     *apicheck.Checker
	checkerErr  error
)

// apiChecker returns the checker of the API's OpenAPI document, loaded once.
func apiChecker(t *testing.T) *apicheck.Checker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = apicheck.New(onceflowhttp.OpenAPI()) })
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checker
}

// waitFor polls cond until it holds, failing the test after 10 s.
func (b *bundle) waitFor(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serve runs the engine until the test ends.
func (b *bundle) serve() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.client.Serve(ctx) }()
	b.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			b.t.Errorf("Serve: %v", err)
		}
	})
}

// newConsole returns the console for cfg.
func newConsole(t *testing.T, cfg onceflowui.Config) *onceflowui.Console {
	t.Helper()
	c, err := onceflowui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
