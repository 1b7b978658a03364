package onceflowhttp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

const ordersYAML = `name: orders
entity: "order:{input.order_id}"
input:
  required: [order_id, email]
steps:
  - id: notify
    kind: go
    func: notify
    effect_key: "notify:{input.order_id}"
  - id: charge
    kind: go
    func: charge
    needs: [notify]
    effect_key: "charge/{input.order_id}"
    on_unknown: needs_review
`

// reviewBundle is a server whose "orders" workflow parks charge when the e-mail has no
// '@' (permanent) or is "drop" (outcome unknown), counting what each step did.
type reviewBundle struct {
	*bundle
	mu    sync.Mutex
	calls map[string]int
}

func (b *reviewBundle) count(step string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[step]
}

func setupReview(t *testing.T) *reviewBundle {
	t.Helper()
	return setupReviewOn(t, nil)
}

// setupReviewOn is setupReview with the client's store wrapped by wrap (nil: as it is).
func setupReviewOn(t *testing.T, wrap func(store.Store) store.Store) *reviewBundle {
	t.Helper()
	ctx := context.Background()
	rb := &reviewBundle{calls: map[string]int{}}
	b := &bundle{t: t, path: filepath.Join(t.TempDir(), "onceflow.db"), now: time.Unix(1700000000, 0)}
	st, err := sqlite.Open(ctx, b.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b.store = st
	var cs store.Store = st
	if wrap != nil {
		cs = wrap(st)
	}
	c, err := onceflow.New(onceflow.Config{Store: cs, WorkerID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	b.client = c
	funcs := map[string]onceflow.StepFunc{}
	d, ps := readerWith(t, funcs).Parse("orders.yaml", []byte(ordersYAML))
	if ps != nil {
		t.Fatal(ps)
	}
	step := func(name string, fn func(email string) error) onceflow.StepFunc {
		return func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			rb.mu.Lock()
			rb.calls[name]++
			rb.mu.Unlock()
			var in struct{ Email string }
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			if err := fn(in.Email); err != nil {
				return nil, err
			}
			return map[string]any{"ok": name}, nil
		}
	}
	maps.Copy(funcs, map[string]onceflow.StepFunc{
		"notify": step("notify", func(string) error { return nil }),
		"charge": step("charge", func(email string) error {
			switch {
			case email == "drop":
				return onceflow.UnknownOutcomeError(errors.New("connection reset after sending"))
			case !strings.Contains(email, "@"):
				return &onceflow.StepError{Class: onceflow.Permanent, ResponseStatus: 422, ResponseExcerpt: `{"error":"bad email"}`, Err: errors.New("payment provider refused: 422")}
			}
			return nil
		}),
	})
	wfs, err := buildWith([]*flowfile.Definition{d})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(wfs[0]); err != nil {
		t.Fatal(err)
	}
	srv, err := NewHandler(c, Options{
		Tokens: []Token{{Name: "form", Secret: ingestToken, Scopes: []Scope{ScopeIngest}}, {Name: "ops", Secret: adminToken, Scopes: []Scope{ScopeAdmin}}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(checked(t, srv))
	t.Cleanup(hs.Close)
	b.url = hs.URL
	rb.bundle = b
	return rb
}

// parked starts a run with email and works it until charge is parked.
func (b *reviewBundle) parked(key, email string) int64 {
	b.t.Helper()
	run, err := b.client.Start(context.Background(), "orders", key, map[string]any{"order_id": key, "email": email})
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.client.Work(context.Background()); err != nil {
		b.t.Fatal(err)
	}
	return run.ID
}

func (b *reviewBundle) eventCount() int {
	b.t.Helper()
	evs, err := b.store.EventList(context.Background(), store.EventListParams{Limit: 100000})
	if err != nil {
		b.t.Fatal(err)
	}
	return len(evs)
}

func TestReviewQueueAPI(t *testing.T) {
	b := setupReview(t)
	id := b.parked("1001", "ada-at-example")
	path := "/v1/review/" + itoa(id) + "/charge"

	wantStatus(t, b.do("GET", "/v1/review", ingestToken, nil, ""), http.StatusForbidden, "forbidden")
	wantStatus(t, b.do("GET", "/v1/review", "", nil, ""), http.StatusUnauthorized, "unauthorized")
	list := b.do("GET", "/v1/review?workflow=orders&reason=permanent_error&entity=order:1001", adminToken, nil, "")
	wantStatus(t, list, http.StatusOK, "")
	items, _ := list.json["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("items: %s", list.body)
	}
	it := items[0].(map[string]any)
	if it["step"] != "charge" || it["reason"] != "permanent_error" || it["response_status"] != float64(422) || it["last_error"] != "payment provider refused: 422" ||
		it["attempts"] != float64(1) || it["effect_may_exist"] != false || it["links"].(map[string]any)["self"] != path {
		t.Errorf("item %v", it)
	}
	wantStatus(t, b.do("GET", "/v1/review?older_than=24h", adminToken, nil, ""), http.StatusOK, "")
	if a := b.do("GET", "/v1/review?older_than=24h", adminToken, nil, ""); !strings.Contains(a.body, `"items":[]`) {
		t.Errorf("older_than=24h: %s", a.body)
	}
	wantStatus(t, b.do("GET", "/v1/review?older_than=soon", adminToken, nil, ""), http.StatusBadRequest, "invalid-parameter")

	show := b.do("GET", path, adminToken, nil, "")
	wantStatus(t, show, http.StatusOK, "")
	if att, _ := show.json["attempts"].([]any); len(att) != 1 || !strings.Contains(show.body, `bad email`) {
		t.Errorf("show: %s", show.body)
	}
	if evs, _ := show.json["events"].([]any); len(evs) == 0 || !strings.Contains(show.body, "parked for review after attempt 1") {
		t.Errorf("show events: %s", show.body)
	}
	wantStatus(t, b.do("GET", "/v1/review/"+itoa(id)+"/nope", adminToken, nil, ""), http.StatusNotFound, "review-item-not-found")
}

func TestReplayAPI(t *testing.T) {
	b := setupReview(t)
	id := b.parked("1001", "ada-at-example")
	path := "/v1/review/" + itoa(id) + "/charge/replay"
	events := b.eventCount()

	preview := b.do("POST", path+"?dry_run=true", adminToken, nil, `{"merge_patch":{"email":"ada@example.com"},"note":"typo"}`)
	wantStatus(t, preview, http.StatusOK, "")
	plan := preview.json["plan"].(map[string]any)
	var actions []string
	for _, s := range plan["steps"].([]any) {
		m := s.(map[string]any)
		actions = append(actions, m["step"].(string)+":"+m["action"].(string))
	}
	if strings.Join(actions, " ") != "notify:kept charge:run" || plan["corrected"] != true || preview.json["dry_run"] != true {
		t.Fatalf("preview: %s", preview.body)
	}
	if n := b.eventCount(); n != events {
		t.Fatalf("the dry run wrote %d events", n-events)
	}

	// Refusals: nothing written.
	for _, tc := range []struct {
		body, typ string
		status    int
	}{
		{`{"merge_patch":"email"}`, "invalid-merge-patch", http.StatusUnprocessableEntity},
		{`{"merge_patch":{"email":null}}`, "invalid-input", http.StatusUnprocessableEntity},
		{`{"mergepatch":{"email":"x@y"}}`, "malformed-json", http.StatusBadRequest},
		{`{"merge_patch":{},"input":{}}`, "invalid-review-request", http.StatusBadRequest},
	} {
		a := b.do("POST", path, adminToken, nil, tc.body)
		wantStatus(t, a, tc.status, tc.typ)
	}
	wantStatus(t, b.do("POST", "/v1/review/"+itoa(id)+"/notify/replay", adminToken, nil, `{}`), http.StatusConflict, "not-in-review")
	wantStatus(t, b.do("POST", "/v1/runs/999/replay", adminToken, nil, `{}`), http.StatusNotFound, "review-item-not-found")
	wantStatus(t, b.do("POST", path+"?dry_run=maybe", adminToken, nil, `{}`), http.StatusBadRequest, "invalid-parameter")
	if n := b.eventCount(); n != events {
		t.Fatalf("refused requests wrote %d events", n-events)
	}

	done := b.do("POST", "/v1/runs/"+itoa(id)+"/replay", adminToken, nil, `{"merge_patch":{"email":"ada@example.com"},"note":"typo"}`)
	wantStatus(t, done, http.StatusOK, "")
	if done.json["revision"] != float64(1) || done.json["actor"] != "token:ops" || done.json["dry_run"] != false {
		t.Fatalf("replay: %s", done.body)
	}
	if _, err := b.client.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.count("notify") != 1 || b.count("charge") != 2 {
		t.Errorf("calls: notify %d, charge %d; want notify once (kept), charge twice", b.count("notify"), b.count("charge"))
	}
	audit := b.do("GET", "/v1/audit?run="+itoa(id), adminToken, nil, "")
	wantStatus(t, audit, http.StatusOK, "")
	if !strings.Contains(audit.body, `"actor":"token:ops"`) || !strings.Contains(audit.body, "input corrected by token:ops (revision 1; fields email)") {
		t.Errorf("audit: %s", audit.body)
	}
}

func TestReviewActionsAPI(t *testing.T) {
	b := setupReview(t)
	resolved := b.parked("1", "nope")
	abandoned := b.parked("2", "nope")
	retried := b.parked("3", "nope")
	unknown := b.parked("4", "drop")

	a := b.do("POST", "/v1/review/"+itoa(resolved)+"/charge/resolve", adminToken, nil, `{"note":"charged by phone","output":{"id":77}}`)
	wantStatus(t, a, http.StatusOK, "")
	if a.json["step_state"] != "completed" || a.json["run_state"] != "completed" || a.json["ledger"] != "completed" || a.json["actor"] != "token:ops" {
		t.Errorf("resolve: %s", a.body)
	}
	a = b.do("POST", "/v1/review/"+itoa(abandoned)+"/charge/abandon", adminToken, nil, `{"note":"order cancelled"}`)
	wantStatus(t, a, http.StatusOK, "")
	if a.json["run_state"] != "failed" {
		t.Errorf("abandon: %s", a.body)
	}
	wantStatus(t, b.do("POST", "/v1/review/"+itoa(abandoned)+"/charge/abandon", adminToken, nil, ``), http.StatusConflict, "not-in-review")
	wantStatus(t, b.do("POST", "/v1/review/"+itoa(retried)+"/charge/fly", adminToken, nil, ``), http.StatusNotFound, "not-found")

	// The outcome-unknown item: only an explicit decision is accepted.
	p := b.do("POST", "/v1/review/"+itoa(unknown)+"/charge/retry", adminToken, nil, `{}`)
	wantStatus(t, p, http.StatusConflict, "outcome-unknown")
	if !strings.Contains(p.body, "send_again") || !strings.Contains(p.body, "it_happened") {
		t.Errorf("outcome-unknown problem: %s", p.body)
	}
	wantStatus(t, b.do("POST", "/v1/review/"+itoa(unknown)+"/charge/abandon", adminToken, nil, `{}`), http.StatusConflict, "outcome-unknown")
	a = b.do("POST", "/v1/review/"+itoa(unknown)+"/charge/resolve", adminToken, nil, `{"it_happened":true,"note":"provider shows the charge"}`)
	wantStatus(t, a, http.StatusOK, "")

	// Bulk: a dry run, then the retry of what remains.
	dry := b.do("POST", "/v1/review/bulk/retry?dry_run=true", adminToken, nil, `{"filter":{"workflow":"orders"}}`)
	wantStatus(t, dry, http.StatusOK, "")
	if dry.json["matched"] != float64(1) || dry.json["ok"] != float64(1) {
		t.Errorf("bulk dry run: %s", dry.body)
	}
	wantStatus(t, b.do("POST", "/v1/review/bulk/retry?dry_run=true", adminToken, nil, `{}`), http.StatusBadRequest, "filter-required")
	wantStatus(t, b.do("POST", "/v1/review/bulk/retry", adminToken, nil, `{}`), http.StatusBadRequest, "items-required")
	wantStatus(t, b.do("POST", "/v1/review/bulk/retry", adminToken, nil, `{"filter":{"reason":"permanent_error"}}`), http.StatusBadRequest, "items-required")
	wantStatus(t, b.do("POST", "/v1/review/bulk/explode?dry_run=true", adminToken, nil, `{"filter":{}}`), http.StatusBadRequest, "invalid-review-request")
	item := dry.json["items"].([]any)[0].(map[string]any)
	bulk := b.do("POST", "/v1/review/bulk/retry", adminToken, nil, `{"items":[{"run_id":`+itoa(int64(item["run_id"].(float64)))+
		`,"step":"charge","version":"`+item["version"].(string)+`"}],"note":"provider fixed"}`)
	wantStatus(t, bulk, http.StatusOK, "")
	if bulk.json["matched"] != float64(1) || bulk.json["ok"] != float64(1) || bulk.json["refused"] != float64(0) {
		t.Errorf("bulk retry: %s", bulk.body)
	}

	// The key report of the hand-resolved charge (a key with a slash).
	k := b.do("GET", "/v1/keys/"+url.PathEscape("charge/1"), adminToken, nil, "")
	wantStatus(t, k, http.StatusOK, "")
	eff, _ := k.json["effect"].(map[string]any)
	if k.json["state"] != "completed" || eff == nil || eff["run_id"] != float64(resolved) || !strings.Contains(k.body, `"result":{"id":77}`) ||
		!strings.Contains(k.body, "resolved by hand by token:ops") {
		t.Errorf("key report: %s", k.body)
	}
	free := b.do("GET", "/v1/keys/never-seen", adminToken, nil, "")
	wantStatus(t, free, http.StatusOK, "")
	if free.json["state"] != "free" {
		t.Errorf("free key: %s", free.body)
	}

	// Audit by entity and time.
	since := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	au := b.do("GET", "/v1/audit?entity=order:2&since="+since, adminToken, nil, "")
	wantStatus(t, au, http.StatusOK, "")
	if !strings.Contains(au.body, `"type":"review.abandoned"`) || !strings.Contains(au.body, "abandoned by token:ops") || strings.Contains(au.body, "order:1\"") {
		t.Errorf("audit by entity: %s", au.body)
	}
	wantStatus(t, b.do("GET", "/v1/audit?since=yesterday", adminToken, nil, ""), http.StatusBadRequest, "invalid-parameter")
	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if au := b.do("GET", "/v1/audit?since="+future, adminToken, nil, ""); !strings.Contains(au.body, `"events":[]`) {
		t.Errorf("audit in the future: %s", au.body)
	}

	// Audit by actor, type and workflow, newest first, paged backwards.
	byOps := b.do("GET", "/v1/audit?actor=token:ops&order=newest", adminToken, nil, "")
	wantStatus(t, byOps, http.StatusOK, "")
	opsEvents, _ := byOps.json["events"].([]any)
	var lastID float64
	for i, e := range opsEvents {
		ev := e.(map[string]any)
		if ev["actor"] != "token:ops" {
			t.Errorf("audit by actor token:ops answered %v", ev)
		}
		if id := ev["id"].(float64); i > 0 && id >= lastID {
			t.Errorf("audit newest first: event %v after %v", id, lastID)
		}
		lastID = ev["id"].(float64)
	}
	if len(opsEvents) < 3 || !strings.Contains(byOps.body, `"type":"review.abandoned"`) || !strings.Contains(byOps.body, `"type":"review.resolved"`) {
		t.Errorf("audit by actor: %s", byOps.body)
	}
	page := b.do("GET", "/v1/audit?actor=token:ops&order=newest&limit=1", adminToken, nil, "")
	wantStatus(t, page, http.StatusOK, "")
	next := page.json["next_before"]
	if next == nil || page.json["next_after"] != nil {
		t.Fatalf("a full page newest first names the page before it: %s", page.body)
	}
	older := b.do("GET", "/v1/audit?actor=token:ops&order=newest&limit=1&before="+strconv.FormatFloat(next.(float64), 'f', 0, 64), adminToken, nil, "")
	olderEvents, _ := older.json["events"].([]any)
	if len(olderEvents) != 1 || olderEvents[0].(map[string]any)["id"] != opsEvents[1].(map[string]any)["id"] {
		t.Errorf("the page before %v: %s, want event %v", next, older.body, opsEvents[1])
	}
	typed := b.do("GET", "/v1/audit?type=review.abandoned,review.resolved,run.cancelled", adminToken, nil, "")
	wantStatus(t, typed, http.StatusOK, "")
	for _, e := range typed.json["events"].([]any) {
		if typ := e.(map[string]any)["type"]; typ != "review.abandoned" && typ != "review.resolved" && typ != "run.cancelled" {
			t.Errorf("audit by type answered a %v", typ)
		}
	}
	if !strings.Contains(typed.body, `"type":"review.abandoned"`) || !strings.Contains(typed.body, `"type":"review.resolved"`) {
		t.Errorf("audit by type: %s", typed.body)
	}
	if none := b.do("GET", "/v1/audit?workflow=no-such-workflow", adminToken, nil, ""); !strings.Contains(none.body, `"events":[]`) {
		t.Errorf("audit of a workflow with no events: %s", none.body)
	}
	wantStatus(t, b.do("GET", "/v1/audit?type=DROP%20TABLE", adminToken, nil, ""), http.StatusBadRequest, "invalid-parameter")
	wantStatus(t, b.do("GET", "/v1/audit?order=sideways", adminToken, nil, ""), http.StatusBadRequest, "invalid-parameter")
	wantStatus(t, b.do("GET", "/v1/audit?before=0", adminToken, nil, ""), http.StatusBadRequest, "invalid-parameter")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestReviewMasksValuesFromStepOutputs shows that the review queue's answers mask what a
// run holds at personal-data fields in its steps' outputs, not only in its input, as the
// run's page does: a phone number that only a lookup step returned, and that a later
// destination echoed in its error while the workflow declared no redaction yet, is masked
// once the field is declared.
func TestReviewMasksValuesFromStepOutputs(t *testing.T) {
	ctx := context.Background()
	const phone = "+4915112345678"
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	calls := onceflow.Workflow{Name: "calls", Steps: []onceflow.Step{
		{ID: "lookup", EffectKey: "lookup:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return map[string]any{"phone": phone}, nil
		}},
		{ID: "dial", Needs: []string{"lookup"}, EffectKey: "dial:{input.id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, &onceflow.StepError{Class: onceflow.Permanent, ResponseStatus: 422, ResponseExcerpt: `{"error":"line ` + phone + ` busy"}`, Err: errors.New("line " + phone + " busy")}
		}},
	}}
	before, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Register(calls); err != nil {
		t.Fatal(err)
	}
	run, err := before.Start(ctx, "calls", "c1", map[string]any{"id": "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := before.Work(ctx); err != nil {
		t.Fatal(err)
	}

	after, err := onceflow.New(onceflow.Config{Store: st, WorkerID: "w", Redact: onceflow.Redaction{Fields: []string{"phone"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := after.Register(calls); err != nil {
		t.Fatal(err)
	}
	srv, err := NewHandler(after, Options{Tokens: []Token{{Name: "ops", Secret: adminToken, Scopes: []Scope{ScopeAdmin}}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(checked(t, srv))
	t.Cleanup(hs.Close)
	b := &bundle{t: t, url: hs.URL, store: st, client: after}
	item := "/v1/review/" + itoa(run.ID) + "/dial"
	for _, path := range []string{"/v1/review?workflow=calls", item, item + "/replay?dry_run=true", "/v1/audit?run=" + itoa(run.ID)} {
		method, body := "GET", ""
		if strings.HasSuffix(path, "dry_run=true") {
			method, body = "POST", "{}"
		}
		a := b.do(method, path, adminToken, nil, body)
		if a.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, path, a.status, a.body)
		}
		if strings.Contains(a.body, phone) {
			t.Errorf("%s %s shows the phone number a step's output holds: %s", method, path, a.body)
		}
	}
	if a := b.do("GET", item, adminToken, nil, ""); !strings.Contains(a.body, "busy") {
		t.Errorf("the item lost its error: %s", a.body)
	}
}

// A replay that passes back its dry run's plan digest is carried out only on that plan: a
// correction that differs from the previewed one is refused with 409 plan-changed, and
// nothing is written or sent; with the digest of its own preview it is carried out.
func TestReplayPlanDigestAPI(t *testing.T) {
	b := setupReview(t)
	id := b.parked("1001", "ada-at-example")
	path := "/v1/review/" + itoa(id) + "/charge/replay"
	digestOf := func(body string) string {
		t.Helper()
		a := b.do("POST", path+"?dry_run=true", adminToken, nil, body)
		wantStatus(t, a, http.StatusOK, "")
		d, _ := a.json["plan"].(map[string]any)["digest"].(string)
		if len(d) != 64 {
			t.Fatalf("dry run without a plan digest: %s", a.body)
		}
		return d
	}
	typo := digestOf(`{"merge_patch":{"email":"ada@exmaple.com"}}`)
	if again := digestOf(`{"merge_patch": {"email": "ada@exmaple.com"}}`); again != typo {
		t.Fatalf("the same correction previewed twice gives digests %s and %s", typo, again)
	}
	fixed := digestOf(`{"merge_patch":{"email":"ada@example.com"}}`)
	if fixed == typo {
		t.Fatal("two corrections give one plan digest")
	}
	events := b.eventCount()

	stale := b.do("POST", path, adminToken, nil, `{"merge_patch":{"email":"ada@example.com"},"plan_digest":"`+typo+`"}`)
	wantStatus(t, stale, http.StatusConflict, "plan-changed")
	if !strings.Contains(stale.body, "preview the replay again") {
		t.Errorf("the refusal does not say to preview again: %s", stale.body)
	}
	if n := b.eventCount(); n != events {
		t.Fatalf("the refused replay wrote %d events", n-events)
	}
	if _, err := b.client.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.count("charge") != 1 {
		t.Fatalf("the refused replay ran charge: %d calls", b.count("charge"))
	}

	done := b.do("POST", path, adminToken, nil, `{"merge_patch":{"email":"ada@example.com"},"plan_digest":"`+fixed+`","note":"typo"}`)
	wantStatus(t, done, http.StatusOK, "")
	if done.json["revision"] != float64(1) {
		t.Fatalf("replay: %s", done.body)
	}
	if _, err := b.client.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.count("charge") != 2 {
		t.Fatalf("after the confirmed replay charge ran %d times, want 2", b.count("charge"))
	}
	// The run has changed: the digest of the old preview no longer confirms anything.
	wantStatus(t, b.do("POST", "/v1/runs/"+itoa(id)+"/replay", adminToken, nil, `{"plan_digest":"`+fixed+`"}`), http.StatusConflict, "")
}

// A bulk confirmation acts on exactly the items of its dry run: of the two previewed, the
// one unchanged is abandoned, the one retried and parked again since is refused with
// item-changed, and an item parked after the dry run is not touched.
func TestBulkConfirmActsOnThePreviewedItemsAPI(t *testing.T) {
	b := setupReview(t)
	kept := b.parked("21", "nope")
	changed := b.parked("22", "nope")
	dry := b.do("POST", "/v1/review/bulk/abandon?dry_run=true", adminToken, nil, `{"filter":{"workflow":"orders"},"note":"customer left"}`)
	wantStatus(t, dry, http.StatusOK, "")
	items, _ := dry.json["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("dry run: %s", dry.body)
	}
	var confirm []string
	for _, x := range items {
		it := x.(map[string]any)
		v, _ := it["version"].(string)
		if v == "" {
			t.Fatalf("a dry run's item without its version: %s", dry.body)
		}
		confirm = append(confirm, fmt.Sprintf(`{"run_id":%v,"step":%q,"version":%q}`, it["run_id"], it["step"], v))
	}

	// Since the dry run: a payment arrived and was parked, and one previewed item was
	// retried and parked again.
	appeared := b.parked("23", "nope")
	wantStatus(t, b.do("POST", "/v1/review/"+itoa(changed)+"/charge/retry", adminToken, nil, `{}`), http.StatusOK, "")
	if _, err := b.client.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
	if it, err := b.client.ReviewGet(context.Background(), changed, "charge"); err != nil || it.State != onceflow.StateNeedsReview || it.Attempts != 2 {
		t.Fatalf("the retried item: %+v, %v", it, err)
	}

	done := b.do("POST", "/v1/review/bulk/abandon", adminToken, nil, `{"items":[`+strings.Join(confirm, ",")+`],"note":"customer left"}`)
	wantStatus(t, done, http.StatusOK, "")
	if done.json["matched"] != float64(2) || done.json["ok"] != float64(1) || done.json["refused"] != float64(1) {
		t.Fatalf("confirmation: %s", done.body)
	}
	for _, x := range done.json["items"].([]any) {
		it := x.(map[string]any)
		switch int64(it["run_id"].(float64)) {
		case kept:
			if it["ok"] != true {
				t.Errorf("the unchanged item: %v", it)
			}
		case changed:
			if it["ok"] != false || it["problem"] != typeBase+"item-changed" || !strings.Contains(it["error"].(string), "changed since") {
				t.Errorf("the changed item: %v", it)
			}
		default:
			t.Errorf("the confirmation acted on an item it did not name: %v", it)
		}
	}
	for id, want := range map[int64]onceflow.State{kept: onceflow.StateFailed, changed: onceflow.StateNeedsReview, appeared: onceflow.StateNeedsReview} {
		if it, err := b.client.ReviewGet(context.Background(), id, "charge"); err != nil || it.State != want {
			t.Errorf("run %d charge after the confirmation: %+v (%v), want %s", id, it, err, want)
		}
	}
	wantStatus(t, b.do("POST", "/v1/review/bulk/abandon", adminToken, nil, `{"items":[],"note":"x"}`), http.StatusBadRequest, "items-required")
	wantStatus(t, b.do("POST", "/v1/review/bulk/abandon", adminToken, nil, `{"items":[{"run_id":`+itoa(appeared)+`,"step":"charge"}]}`),
		http.StatusBadRequest, "invalid-review-request")
	wantStatus(t, b.do("POST", "/v1/review/bulk/abandon", adminToken, nil, `{"filter":{},"items":[{"run_id":1,"step":"charge","version":"x"}]}`),
		http.StatusBadRequest, "invalid-review-request")
}
