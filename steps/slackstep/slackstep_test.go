package slackstep_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

const orderYAML = `name: order-paid
steps:
  - id: tell_sales
    kind: slack
    effect_key: "sales-message:{input.order_id}"
    slack:
      webhook: "{env.SLACK_SALES_WEBHOOK}"
      text: "Order {input.order_id} is paid"
      blocks:
        - {type: section, text: {type: mrkdwn, text: "*{input.order_id}*: {input.total} EUR"}}
`

// A file's slack step posts its message, with the effect key as Idempotency-Key; the
// webhook's URL is a secret of the file; an unknown outcome waits for review by default.
func TestSlackStepFromFile(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	status := http.StatusOK
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, r.Method+" "+r.URL.Path+" "+r.Header.Get("Idempotency-Key")+" "+string(b))
		code := status
		mu.Unlock()
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "ok")
	}))
	defer hook.Close()
	env := map[string]string{"SLACK_SALES_WEBHOOK": hook.URL + "/services/T0/B0/s3cr3t"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	kinds, err := stdsteps.New(stdsteps.Options{AllowNet: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Env: lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer kinds.Close()
	d, ps := (&flowfile.Reader{Kinds: kinds}).Parse("order.yaml", []byte(orderYAML))
	if ps != nil {
		t.Fatal(ps)
	}
	if !slices.Contains(d.SecretNames(), "SLACK_SALES_WEBHOOK") {
		t.Errorf("SecretNames = %q: the webhook URL is a credential", d.SecretNames())
	}
	ws, err := flowfile.NewBuilder(flowfile.BuildOptions{Env: lookup}).Workflows([]*flowfile.Definition{d})
	if err != nil {
		t.Fatal(err)
	}
	if ws[0].Steps[0].OnUnknown != onceflow.ReviewUnknown {
		t.Errorf("OnUnknown = %q: Slack does not deduplicate", ws[0].Steps[0].OnUnknown)
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
	if err := c.Register(ws[0]); err != nil {
		t.Fatal(err)
	}
	run := func(id string) *store.Step {
		t.Helper()
		r, err := c.Start(ctx, "order-paid", id, map[string]any{"order_id": id, "total": 42})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Work(ctx); err != nil {
			t.Fatal(err)
		}
		steps, err := st.StepListByRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return steps[0]
	}
	if s := run("A-1"); s.State != store.StateCompleted {
		t.Fatalf("step %s %s", s.State, s.Reason)
	}
	mu.Lock()
	got := posts[0]
	status = http.StatusNotFound // no_service: the webhook was removed
	mu.Unlock()
	var body map[string]any
	if !strings.HasPrefix(got, "POST /services/T0/B0/s3cr3t sales-message:A-1 ") || json.Unmarshal([]byte(got[strings.Index(got, "{"):]), &body) != nil ||
		body["text"] != "Order A-1 is paid" || !strings.Contains(got, `"text":"*A-1*: 42 EUR"`) {
		t.Fatalf("posted %s", got)
	}
	if s := run("A-2"); s.State != store.StateNeedsReview || s.Reason != store.ReasonPermanentError {
		t.Fatalf("a 404 (no_service): step %s %s, want needs_review", s.State, s.Reason)
	}
}

// A webhook written in the file, or one that reads the run's data, is refused where it is.
func TestSlackWebhookComesFromTheEnvironment(t *testing.T) {
	kinds, err := stdsteps.New(stdsteps.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &flowfile.Reader{Kinds: kinds}
	for webhook, want := range map[string]string{
		`"https://hooks.slack.com/services/T0/B0/x"`: `order.yaml:7:16: step "tell_sales": slack webhook: "https://hooks.slack.com/services/T0/B0/x" must come from the environment`,
		`"{input.hook}"`: `order.yaml:7:16: step "tell_sales": slack webhook: {input.hook}: notification settings read only {env.NAME}`,
	} {
		src := strings.Replace(orderYAML, `"{env.SLACK_SALES_WEBHOOK}"`, webhook, 1)
		if _, ps := r.Parse("order.yaml", []byte(src)); !strings.Contains(ps.Error(), want) {
			t.Errorf("webhook %s: problems\n%v\nwant %s", webhook, ps, want)
		}
	}
	src := strings.Replace(orderYAML, `      text: "Order {input.order_id} is paid"`+"\n", "", 1)
	if _, ps := r.Parse("order.yaml", []byte(src)); !strings.Contains(ps.Error(), `step "tell_sales": slack text is required`) {
		t.Errorf("without text: %v", ps)
	}
}
