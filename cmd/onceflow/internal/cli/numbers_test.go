package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store"
)

const bigIDsYAML = `name: invoices
entity: "customer:{input.item.customer_id}"
schedule:
  cron: "0 9 1 * *"
  run_key: "invoice:{item.customer_id}:{schedule.period}"
  for_each:
    url: "{env.BILLING_URL}/customers"
    items: data
    cursor: meta.cursor
steps:
  - id: invoice
    kind: http
    effect_key: "invoice:{input.item.customer_id}:{input.schedule.period}"
    http:
      url: "{env.BILLING_URL}/invoices"
      body: {customer_id: "{input.item.customer_id}", label: "customer {input.item.customer_id}"}
  - id: lookup
    kind: http
    needs: [invoice]
    effect_key: "lookup:{input.item.customer_id}"
    http:
      method: GET
      url: "{env.BILLING_URL}/accounts/{input.item.customer_id}"
  - id: vip
    kind: http
    needs: [lookup]
    when: 'steps.lookup.output.x.id == 9007199254740993'
    effect_key: "vip:{steps.lookup.output.x.id}"
    http:
      url: "{env.BILLING_URL}/vip"
      body: {id: "{steps.lookup.output.x.id}", text: "vip {steps.lookup.output.x.id}"}
`

// Integer ids above 2^53 reach destinations exactly as the list gave them: a fan-out item
// with customer_id 9007199254740993 is invoiced as 9007199254740993, not as its neighbour
// 9007199254740992 (which is another customer, invoiced on its own); a numeric cursor of 20
// digits is sent back as it was; a step's output read by a later step's template and by
// its when condition keeps every digit, and the condition is true for that id only.
func TestBigIntegersStayExact(t *testing.T) {
	var mu sync.Mutex
	var invoices, vips []string
	var cursors []string
	billing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.URL.Path == "/customers":
			cursors = append(cursors, r.URL.Query().Get("cursor"))
			if r.URL.Query().Get("cursor") == "" {
				io.WriteString(w, `{"data": [{"customer_id": 9007199254740993}], "meta": {"cursor": 12345678901234567891}}`)
			} else {
				io.WriteString(w, `{"data": [{"customer_id": 9007199254740992}], "meta": {}}`)
			}
		case r.URL.Path == "/invoices":
			invoices = append(invoices, string(b))
			io.WriteString(w, `{"id": "inv"}`)
		case strings.HasPrefix(r.URL.Path, "/accounts/"):
			io.WriteString(w, `{"x": {"id": `+strings.TrimPrefix(r.URL.Path, "/accounts/")+`}}`)
		case r.URL.Path == "/vip":
			vips = append(vips, string(b))
			io.WriteString(w, `{}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer billing.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "invoices.yaml"), []byte(bigIDsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	st := openSQLite(t, filepath.Join(t.TempDir(), "n.db"))
	defer st.Close()
	a, err := server.New(context.Background(), server.Config{Store: st, Workflows: []string{dir}, AllowNet: loopback, Engine: onceflow.Config{Workers: 4},
		Env: func(k string) (string, bool) {
			if k == "BILLING_URL" {
				return billing.URL, true
			}
			return "", false
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	if _, err := a.Client().TriggerSchedule(ctx, "invoices", time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := a.Client().Work(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	runs, err := st.RunList(ctx, store.RunListParams{Workflow: "invoices"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range runs {
		keys = append(keys, r.RunKey+" "+string(r.State))
	}
	sort.Strings(keys)
	if strings.Join(keys, ", ") != "invoice:9007199254740992:2026-11 completed, invoice:9007199254740993:2026-11 completed" {
		t.Errorf("runs %v; want one completed run per customer, under its exact id", keys)
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(invoices)
	want := []string{
		`{"customer_id":9007199254740992,"label":"customer 9007199254740992"}`,
		`{"customer_id":9007199254740993,"label":"customer 9007199254740993"}`,
	}
	if strings.Join(invoices, "\n") != strings.Join(want, "\n") {
		t.Errorf("invoices sent:\n%s\nwant:\n%s", strings.Join(invoices, "\n"), strings.Join(want, "\n"))
	}
	if len(cursors) != 2 || cursors[1] != "12345678901234567891" {
		t.Errorf("cursors sent back %q; want the 20-digit cursor as the list wrote it", cursors)
	}
	if len(vips) != 1 || vips[0] != `{"id":9007199254740993,"text":"vip 9007199254740993"}` {
		t.Errorf("vip requests %q; want exactly one, for 9007199254740993 (the when condition compares exactly)", vips)
	}
}
