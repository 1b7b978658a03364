package onceflowhttp

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/store/sqlite"
)

// GET /v1/workflows lists what is served, with webhook paths; starting an unknown
// workflow is a 404 that names the served ones, and says nothing about Go.
func TestListWorkflowsAndUnknownWorkflow(t *testing.T) {
	b := setup(t, fmt.Sprintf(paymentYAML, "payments", "hmac", `"{input.id}"`))
	list := b.do("GET", "/v1/workflows", ingestToken, nil, "")
	wantStatus(t, list, http.StatusOK, "")
	want := `{"workflows":[` +
		`{"name":"payment","entity":"order:{input.data.object.metadata.order_id}","steps":["mark_paid"],` +
		`"webhook":{"name":"payments","path":"/hooks/payments","scheme":"hmac","event_types":["payment_intent.succeeded"]},` +
		`"links":{"runs":"/v1/runs?workflow=payment"}},` +
		`{"name":"website-lead","run_key":"{input.submission_id}","entity":"lead:{input.submission_id}","required_input":["submission_id"],"steps":["crm"],` +
		`"links":{"start":"/v1/workflows/website-lead/runs","runs":"/v1/runs?workflow=website-lead"}}]}` + "\n"
	if list.body != want {
		t.Fatalf("GET /v1/workflows\n got %s\nwant %s", list.body, want)
	}
	if a := b.do("GET", "/v1/workflows", "", nil, ""); a.status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", a.status)
	}

	for _, hdr := range []map[string]string{nil, {"Idempotency-Key": "k-1"}} {
		a := b.do("POST", "/v1/workflows/website-leads/runs", ingestToken, hdr, `{"submission_id": 1}`)
		wantStatus(t, a, http.StatusNotFound, "workflow-not-found")
		detail, _ := a.json["detail"].(string)
		if !strings.Contains(detail, `"website-leads"`) || !strings.Contains(detail, "the served workflows are website-lead") ||
			strings.Contains(strings.ToLower(detail), "regist") {
			t.Fatalf("detail %q", detail)
		}
		if fmt.Sprint(a.json["workflows"]) != "[website-lead]" {
			t.Fatalf("workflows member %v", a.json["workflows"])
		}
	}
	if n := len(b.runs()); n != 0 {
		t.Fatalf("%d runs stored", n)
	}
}

// NewHandler refuses webhook receivers whose workflows the client does not have.
func TestNewHandlerChecksWorkflows(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	d, ps := readerWith(t, nil).Parse("hook.yaml", []byte(fmt.Sprintf(paymentYAML, "payments", "hmac", `"{input.id}"`)))
	if ps != nil {
		t.Fatal(ps)
	}
	_, err = NewHandler(c, Options{Receivers: receivers(t, []*flowfile.Definition{d}, nil)})
	if err == nil || !strings.Contains(err.Error(), `webhook "payments" starts workflow "payment", which is not registered on the client`) {
		t.Fatalf("unregistered workflow: %v", err)
	}
	if _, err := NewHandler(nil, Options{}); err == nil {
		t.Fatal("a nil client was accepted")
	}
}
