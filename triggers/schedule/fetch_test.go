package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
)

// A for_each list is fetched page by page, following next links or a cursor, through the
// egress policy: a list on a loopback address is refused unless the operator allows it.
func TestForEachFetch(t *testing.T) {
	t.Parallel()
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		from, _ := strconv.Atoi(r.URL.Query().Get("after"))
		if r.URL.Query().Get("period") != "2026-11" {
			http.Error(w, "period", http.StatusBadRequest)
			return
		}
		var data []map[string]any
		for i := from; i < from+2 && i < 5; i++ {
			data = append(data, map[string]any{"customer_id": fmt.Sprintf("c%d", i)})
		}
		body := map[string]any{"data": data, "meta": map[string]any{}}
		if from+2 < 5 {
			if r.URL.Query().Get("mode") == "cursor" {
				body["meta"] = map[string]any{"cursor": strconv.Itoa(from + 2)}
			} else {
				body["links"] = map[string]any{"next": fmt.Sprintf("?period=2026-11&after=%d", from+2)}
			}
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	defer srv.Close()
	env := func(k string) (string, bool) {
		if k == "BILLING_URL" {
			return srv.URL, true
		}
		if k == "BILLING_TOKEN" {
			return "tok-secret-1", true
		}
		return "", false
	}
	tick := onceflow.Tick{Schedule: "invoices", Time: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), Period: "2026-11"}
	walk := func(client *http.Client, f *ForEachSettings) ([]string, error) {
		fetch, err := newListFetch(f, client, env)
		if err != nil {
			return nil, err
		}
		var ids []string
		cursor := ""
		for {
			page, err := fetch(context.Background(), tick, cursor)
			if err != nil {
				return nil, err
			}
			for _, it := range page.Items {
				var v struct {
					CustomerID string `json:"customer_id"`
				}
				_ = json.Unmarshal(it, &v)
				ids = append(ids, v.CustomerID)
			}
			if page.Next == "" {
				return ids, nil
			}
			cursor = page.Next
		}
	}
	allowed := &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	deps := allowed.Client(5 * time.Second)
	headers := map[string]string{"Authorization": "Bearer {env.BILLING_TOKEN}"}
	for _, f := range []*ForEachSettings{
		{URL: "{env.BILLING_URL}/customers?period={schedule.period}", Items: "data", Next: "links.next", Headers: headers},
		{URL: "{env.BILLING_URL}/customers?period={schedule.period}&mode=cursor", Items: "data", Cursor: "meta.cursor", CursorParam: "after", Headers: headers},
	} {
		ids, err := walk(deps, f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(ids, ",") != "c0,c1,c2,c3,c4" {
			t.Errorf("%+v: items %v", f, ids)
		}
	}
	if auth[0] != "Bearer tok-secret-1" {
		t.Errorf("authorization header %q", auth[0])
	}
	// Without the operator's permission, loopback is refused at connect time.
	closed := &egress.Policy{}
	_, err := walk(closed.Client(5*time.Second), &ForEachSettings{URL: "{env.BILLING_URL}/customers?period={schedule.period}", Items: "data"})
	if err == nil || !strings.Contains(err.Error(), "not allowed") && !strings.Contains(err.Error(), "blocked") && !strings.Contains(err.Error(), "refuse") {
		t.Fatalf("loopback list without permission: %v", err)
	}
	var perm *onceflow.StepError
	if errors.As(err, &perm) && perm.Class == onceflow.Permanent {
		t.Errorf("a refused address is reported as permanent; it should be retried then reviewed like any fetch: %v", err)
	}
	// A 404 is permanent; the secret in the URL never shows in the error.
	_, err = walk(deps, &ForEachSettings{URL: "{env.BILLING_URL}/customers?period=2026-10", Items: "data"})
	if err == nil || !errors.As(err, &perm) || perm.Class != onceflow.Permanent {
		t.Errorf("400 answer: %v, want a permanent error", err)
	}
}
