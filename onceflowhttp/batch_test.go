package onceflowhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

const batchPath = "/v1/workflows/website-lead/runs:batch"

// batchAnswerOf decodes a batch answer.
func batchAnswerOf(t *testing.T, a answer) (results []map[string]any, counts map[string]any) {
	t.Helper()
	var out struct {
		Results []map[string]any `json:"results"`
		Counts  map[string]any   `json:"counts"`
	}
	if err := json.Unmarshal([]byte(a.body), &out); err != nil {
		t.Fatalf("batch answer %s: %v", a.body, err)
	}
	return out.Results, out.Counts
}

// A batch answers every item on its own in one 200, good items mixed with bad ones: new
// keys are created (given, or derived by the run_key template), a key started before is
// a duplicate with the same input and a conflict with another, a key repeated inside the
// batch is its first item's duplicate, and a bad key, a missing key that cannot be derived,
// a missing input, an input that is not an object or lacks a required field, and an input
// larger than MaxBody are each invalid with the problem a single start would answer. The
// same batch again answers the created items as duplicates, with the same runs, byte for
// byte. On both stores.
func TestStartBatch(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testStartBatch(t, setupWith(t, func(o *Options) { o.MaxBodyMemory = 4 << 20 })) // room for an input over MaxBody
	})
	t.Run("postgres", func(t *testing.T) {
		u, schema := testsvc.PostgresSchema(t, "onceflow_http_batch_")
		st, err := postgres.Open(context.Background(), u, postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		b, _ := storeBundle(t, st)
		testStartBatch(t, b)
	})
}

func testStartBatch(t *testing.T, b *bundle) {
	first := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-1"}, `{"submission_id": 1}`)
	wantStatus(t, first, http.StatusCreated, "")
	big := strings.Repeat("x", 1<<20) // larger than MaxBody, whichever the bundle sets
	body := `{"items": [
		{"idempotency_key": "form-2", "input": {"submission_id": 2}},
		{"input": {"submission_id": 3}},
		{"idempotency_key": "form-1", "input": {"submission_id": 1}},
		{"idempotency_key": "form-1", "input": {"submission_id": 9}},
		{"idempotency_key": "form-2", "input": {"submission_id": 2}},
		{"idempotency_key": "", "input": {"submission_id": 5}},
		{"input": {"other": 6}},
		{"idempotency_key": "form-7", "input": {}},
		{"idempotency_key": "form-8"},
		{"idempotency_key": "form-9", "input": "text"},
		{"idempotency_key": "form-10", "input": {"submission_id": "` + big + `"}},
		{"idempotency_key": "form-\u202e11", "input": {"submission_id": 11}}
	]}`
	a := b.do("POST", batchPath, ingestToken, nil, body)
	wantStatus(t, a, http.StatusOK, "")
	results, counts := batchAnswerOf(t, a)
	want := []struct{ status, problem string }{
		{"created", ""}, {"created", ""}, {"duplicate", ""}, {"conflict", "idempotency-key-reused"}, {"duplicate", ""},
		{"invalid", "invalid-idempotency-key"}, {"invalid", "idempotency-key-missing"}, {"invalid", "invalid-input"},
		{"invalid", "invalid-input"}, {"invalid", "invalid-input"}, {"invalid", "body-too-large"}, {"invalid", "invalid-idempotency-key"},
	}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d: %s", len(results), len(want), a.body)
	}
	for i, w := range want {
		r := results[i]
		if r["index"] != float64(i) || r["status"] != w.status {
			t.Errorf("item %d: %v, want status %s", i, r, w.status)
			continue
		}
		p, _ := r["problem"].(map[string]any)
		switch {
		case w.problem == "" && (p != nil || r["run"] == nil):
			t.Errorf("item %d: %v, want a run and no problem", i, r)
		case w.problem != "" && (p == nil || p["type"] != typeBase+w.problem || r["run"] != nil):
			t.Errorf("item %d: %v, want problem %s and no run", i, r, w.problem)
		}
	}
	if fmt.Sprint(counts) != "map[conflict:1 created:2 duplicate:2 invalid:7]" {
		t.Errorf("counts %v, want 2 created, 2 duplicates, 1 conflict, 7 invalid", counts)
	}
	run := func(i int) map[string]any { m, _ := results[i]["run"].(map[string]any); return m }
	if run(2)["id"] != first.json["id"] || run(4)["id"] != run(0)["id"] || run(1)["run_key"] != "3" || run(0)["entity"] != "lead:2" {
		t.Errorf("runs %v %v %v %v; want item 2 the first start's run, item 4 item 0's, item 1's key derived", run(0), run(1), run(2), run(4))
	}
	if p := results[3]["problem"].(map[string]any); p["run_id"] != first.json["id"] {
		t.Errorf("conflict problem %v, want run_id %v", p, first.json["id"])
	}
	if p := results[10]["problem"].(map[string]any); p["status"] != float64(413) || !strings.Contains(p["detail"].(string), "the limit is") {
		t.Errorf("too large input: %v, want a 413 problem naming the limit", p)
	}

	runs := func() []*store.Run {
		rs, err := b.client.Store().RunList(context.Background(), store.RunListParams{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	keys := map[string]int{}
	for _, r := range runs() {
		keys[r.RunKey]++
	}
	if fmt.Sprint(keys) != "map[3:1 form-1:1 form-2:1]" {
		t.Fatalf("runs stored: %v, want form-1, form-2 and 3 once each", keys)
	}
	if err := b.client.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := b.client.Store().EventList(context.Background(), store.EventListParams{RunID: int64(run(0)["id"].(float64))})
	if err != nil || len(evs) == 0 || evs[0].Type != store.EventRunCreated || evs[0].Actor != "token:form" {
		t.Fatalf("events of item 0's run: %v (%v), want run.created by token:form", evs, err)
	}

	// The same batch again: the created items are duplicates now, answered byte for byte.
	again := b.do("POST", batchPath, ingestToken, nil, body)
	wantStatus(t, again, http.StatusOK, "")
	results2, counts2 := batchAnswerOf(t, again)
	if fmt.Sprint(counts2) != "map[conflict:1 created:0 duplicate:4 invalid:7]" {
		t.Errorf("counts of the repeated batch %v, want 4 duplicates", counts2)
	}
	for _, i := range []int{0, 1} {
		was, _ := json.Marshal(results[i]["run"])
		now, _ := json.Marshal(results2[i]["run"])
		if results2[i]["status"] != "duplicate" || string(was) != string(now) {
			t.Errorf("item %d again: %v, want a duplicate answering %s", i, results2[i], was)
		}
	}
	if n := len(runs()); n != 3 {
		t.Fatalf("%d runs after the repeated batch, want 3", n)
	}
}

// A batch refused as a whole starts nothing: a token that may not start the workflow, a
// workflow the token may not know of, more items than MaxBatchItems, a body larger than
// MaxBatchBody, a body that is not {"items": [...]} with known members, no items, a
// repeated member, an Idempotency-Key header, an unknown query parameter.
func TestStartBatchRefused(t *testing.T) {
	b := setupWith(t, func(o *Options) {
		withForm(o)
		o.MaxBatchItems, o.MaxBatchBody = 3, 600
	}, opsOnly)
	item := func(k int) string {
		return fmt.Sprintf(`{"idempotency_key": "k-%d", "input": {"submission_id": %d}}`, k, k)
	}
	items := func(n int) string {
		var s []string
		for i := range n {
			s = append(s, item(i))
		}
		return `{"items": [` + strings.Join(s, ", ") + `]}`
	}
	for _, tc := range []struct {
		name, path, token string
		header            map[string]string
		body              string
		status            int
		problem           string
	}{
		{"a token limited to other workflows", "/v1/workflows/refunds/runs:batch", formToken, nil, items(1), 403, "start-refused"},
		{"a workflow that names other tokens", "/v1/workflows/refunds/runs:batch", ingestToken, nil, items(1), 403, "start-refused"},
		{"a read token", batchPath, readToken, nil, items(1), 403, "forbidden"},
		{"no token", batchPath, "", nil, items(1), 401, "unauthorized"},
		{"an unknown workflow", "/v1/workflows/nope/runs:batch", ingestToken, nil, items(1), 404, "workflow-not-found"},
		{"over the item limit", batchPath, ingestToken, nil, items(4), 413, "too-many-items"},
		{"over the body limit", batchPath, ingestToken, nil, `{"items": [` + item(1) + `], "pad": "` + strings.Repeat("x", 600) + `"}`, 413, "body-too-large"},
		{"an array", batchPath, ingestToken, nil, `[` + item(1) + `]`, 400, "invalid-batch"},
		{"no items", batchPath, ingestToken, nil, `{"items": []}`, 400, "invalid-batch"},
		{"items missing", batchPath, ingestToken, nil, `{"runs": [` + item(1) + `]}`, 400, "invalid-batch"},
		{"an unknown item member", batchPath, ingestToken, nil, `{"items": [{"idempotency_kye": "k", "input": {"submission_id": 1}}]}`, 400, "invalid-batch"},
		{"two documents", batchPath, ingestToken, nil, items(1) + ` {}`, 400, ""},
		{"a repeated member", batchPath, ingestToken, nil, `{"items": [{"idempotency_key": "a", "idempotency_key": "b", "input": {}}]}`, 400, "duplicate-member"},
		{"malformed", batchPath, ingestToken, nil, `{"items": [`, 400, "malformed-json"},
		{"an Idempotency-Key header", batchPath, ingestToken, map[string]string{"Idempotency-Key": "k-0"}, items(1), 400, "invalid-idempotency-key"},
		{"an unknown parameter", batchPath + "?dryrun=true", ingestToken, nil, items(1), 400, "unknown-parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.do("POST", tc.path, tc.token, tc.header, tc.body)
			wantStatus(t, a, tc.status, tc.problem)
		})
	}
	if n := len(b.runs()); n != 0 {
		t.Fatalf("%d runs stored by refused batches", n)
	}
	// The listed token starts its own workflow, up to the limit.
	a := b.do("POST", batchPath, formToken, nil, items(3))
	wantStatus(t, a, http.StatusOK, "")
	if _, counts := batchAnswerOf(t, a); counts["created"] != float64(3) {
		t.Fatalf("counts %v, want 3 created", counts)
	}
}
