package onceflowhttp

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/store"
)

const (
	formToken  = "form-token-0123456789abc"
	queueYAML  = "name: orders\nqueue: {nats: {stream: ORDERS, consumer: onceflow}}\nsteps:\n  - id: store\n    kind: go\n    func: noop\n"
	openedYAML = "name: orders-api\napi: true\nqueue: {nats: {stream: ORDERS2, consumer: onceflow}}\nsteps:\n  - id: store\n    kind: go\n    func: noop\n"
	opsOnly    = "name: refunds\napi: {tokens: [ops]}\nsteps:\n  - id: refund\n    kind: go\n    func: noop\n"
)

// withForm adds a token limited to website-lead to the bundle's tokens.
func withForm(o *Options) {
	o.Tokens = append(o.Tokens, Token{Name: "website", Secret: formToken, Scopes: []Scope{ScopeIngest}, Workflows: []string{"website-lead"}})
}

// A token starts what the client's access rule lets it: a token's own list, a file's
// api.tokens, a queue's workflow closed to tokens unless its file says api: true. Every
// refusal is a 403 that says what to change, stores nothing, and comes before the body is
// read (a refused token learns nothing about its body).
func TestStartRunAccess(t *testing.T) {
	b := setupWith(t, withForm, queueYAML, openedYAML, opsOnly)
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }
	for _, tc := range []struct {
		name, workflow, token, body string
		status                      int
		problem, detail             string
	}{
		{"a listed token, not its workflow", "refunds", formToken, `{}`, 403, "start-refused",
			`token "website" may start only website-lead; to let it start refunds, add it to the token's list in ONCEFLOW_API_TOKENS (name:scope:workflows=website-lead+refunds:secret)`},
		{"a token the file does not name", "refunds", ingestToken, `{}`, 403, "start-refused",
			`workflow "refunds" may be started only by the tokens ops; to let token "form" start it, add the token to api.tokens in wf3.yaml`},
		{"a queue's workflow", "orders", adminToken, `{}`, 403, "start-refused",
			`workflow "orders" is started by its queue, not by API tokens; to let tokens start it, add api: true (or api: {tokens: [ops]}) to wf1.yaml`},
		{"a refused token's malformed body", "orders", ingestToken, `{"x": `, 403, "start-refused", ""},
		{"a queue's rejected messages", "orders.rejected", adminToken, `{}`, 404, "workflow-not-found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.do("POST", "/v1/workflows/"+tc.workflow+"/runs", tc.token, key("k-1"), tc.body)
			wantStatus(t, a, tc.status, tc.problem)
			if tc.detail != "" && a.json["detail"] != tc.detail {
				t.Fatalf("detail %q\nwant   %q", a.json["detail"], tc.detail)
			}
		})
	}
	if n := len(b.runs()); n != 0 {
		t.Fatalf("%d runs stored by refused starts", n)
	}
	for _, ok := range []struct{ workflow, token string }{
		{"website-lead", formToken}, {"refunds", adminToken}, {"orders-api", ingestToken}, {"website-lead", ingestToken},
	} {
		wantStatus(t, b.do("POST", "/v1/workflows/"+ok.workflow+"/runs", ok.token, key("k-"+ok.token[:4]), `{"submission_id": 1}`), http.StatusCreated, "")
	}
	// The listing shows a token what it may know of, with a start link where it may start.
	list := b.do("GET", "/v1/workflows", formToken, nil, "")
	wantStatus(t, list, http.StatusOK, "")
	if names := workflowNames(list); !slices.Equal(names, []string{"website-lead"}) {
		t.Fatalf("the listed token sees %v", names)
	}
	list = b.do("GET", "/v1/workflows", ingestToken, nil, "")
	var starts []string
	for _, w := range list.json["workflows"].([]any) {
		w := w.(map[string]any)
		if _, ok := w["links"].(map[string]any)["start"]; ok {
			starts = append(starts, w["name"].(string))
		}
	}
	if names := workflowNames(list); !slices.Equal(names, []string{"orders", "orders-api", "website-lead"}) || !slices.Equal(starts, []string{"orders-api", "website-lead"}) {
		t.Fatalf("an unlisted token sees %v and may start %v", names, starts)
	}
	// The 404 of the engine's own workflow lists what the token may start, as for any
	// unknown name.
	a := b.do("POST", "/v1/workflows/orders.rejected/runs", formToken, key("k"), `{}`)
	if a.json["detail"] != `no workflow named "orders.rejected" is served here; the served workflows are website-lead` {
		t.Fatalf("404 %s", a.body)
	}
}

func workflowNames(a answer) []string {
	var out []string
	for _, w := range a.json["workflows"].([]any) {
		out = append(out, w.(map[string]any)["name"].(string))
	}
	return out
}

// NewHandler refuses a token whose list names a workflow that does not exist, or that it
// could never start, and a file naming a token that is not configured; the error names
// the token and the workflow, and no secret.
func TestNewHandlerChecksTokenLists(t *testing.T) {
	b := setup(t, queueYAML)
	for _, tc := range []struct {
		tokens []Token
		want   string
	}{
		{[]Token{{Name: "website", Secret: formToken, Scopes: []Scope{ScopeIngest}, Workflows: []string{"website-leads"}}},
			`API token "website" names workflow "website-leads", which is not registered`},
		{[]Token{{Name: "website", Secret: formToken, Scopes: []Scope{ScopeIngest}, Workflows: []string{"orders"}}},
			`API token "website" names workflow "orders", which it may not start: workflow "orders" is started by its queue`},
		{[]Token{{Name: "website", Secret: formToken, Scopes: []Scope{ScopeIngest}, Workflows: []string{"orders.rejected"}}},
			`API token "website" names workflow "orders.rejected", which only the engine starts`},
	} {
		if err := b.client.Register(onceflow.Workflow{Name: "orders.rejected", Access: onceflow.Access{Internal: true},
			Steps: []onceflow.Step{{ID: "a", Do: func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}}}); err != nil && !strings.Contains(err.Error(), "already registered") {
			t.Fatal(err)
		}
		_, err := NewHandler(b.client, Options{Tokens: tc.tokens})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), formToken) {
			t.Errorf("NewHandler: %v\nwant an error containing %s", err, tc.want)
		}
	}
	c := setup(t, opsOnly)
	_, err := NewHandler(c.client, Options{Tokens: []Token{{Name: "website", Secret: formToken, Scopes: []Scope{ScopeIngest}}}})
	if want := `workflow "refunds" may be started only by API token "ops", which is not configured`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewHandler: %v\nwant an error containing %s", err, want)
	}
}

// ParseTokens reads a token's workflow list before its secret; what is wrong is said
// without the secret.
func TestParseTokenWorkflowLists(t *testing.T) {
	toks, err := ParseTokens("website:ingest:workflows=website-lead+contact.form:0123456789abcdef:with:colons, ops:admin:fedcba9876543210")
	if err != nil || len(toks) != 2 || !slices.Equal(toks[0].Workflows, []string{"website-lead", "contact.form"}) ||
		toks[0].Secret != "0123456789abcdef:with:colons" || toks[1].Workflows != nil {
		t.Fatalf("%+v %v", toks, err)
	}
	const secret = "s3cr3t-value-0123456789"
	for bad, want := range map[string]string{
		"website:ingest:workflows=website-lead":                            `API token "website": its workflow list is not followed by a secret`,
		"website:ingest:workflows=:" + secret:                              `API token "website": workflow 1 of its list is not a workflow name`,
		"website:ingest:workflows=a+" + secret[:4] + "/x:" + secret:        `API token "website": workflow 2 of its list is not a workflow name`,
		"website:ingest:workflows=a+a:" + secret:                           `API token "website": its list names workflow "a" twice`,
		"website:ingest:workflows=a:short":                                 `API token "website": the secret is shorter than 16 characters`,
		secret + ":ingest:workflows=a:website":                             `the secret is shorter than 16 characters`,
		"website:ingest:workflows=lead:" + secret + ",ops:admin:" + secret: `its secret is another token's too`,
	} {
		_, err := ParseTokens(bad)
		if err == nil || !strings.Contains(err.Error(), want) || (strings.Contains(err.Error(), secret) && !strings.HasPrefix(bad, secret)) {
			t.Errorf("ParseTokens(%q) = %v, want %q", bad, err, want)
		}
	}
}

// A start through the API names its token in the audit trail (token:NAME), as review
// actions do; a webhook's delivery names its webhook (webhook:NAME).
func TestStartsAreAuditedWithTheirCaller(t *testing.T) {
	b := setup(t, fmt.Sprintf(paymentYAML, "payments", "stripe", `"{input.id}"`))
	created := b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, map[string]string{"Idempotency-Key": "form-a1"}, `{"submission_id": 1}`)
	wantStatus(t, created, http.StatusCreated, "")
	again := b.do("POST", "/v1/workflows/website-lead/runs", adminToken, map[string]string{"Idempotency-Key": "form-a1"}, `{"submission_id": 1}`)
	wantStatus(t, again, http.StatusCreated, "")
	event := `{"id": "evt_a1", "type": "payment_intent.succeeded", "data": {"object": {"metadata": {"order_id": "7"}}}}`
	h, err := signature.Sign(signature.Config{Scheme: signature.Stripe, Secrets: []string{b.env["HOOK_SECRET"]}}, 0, "", b.now, []byte(event))
	if err != nil {
		t.Fatal(err)
	}
	delivered := b.do("POST", "/hooks/payments", "", map[string]string{"Stripe-Signature": h.Get("Stripe-Signature")}, event)
	wantStatus(t, delivered, http.StatusOK, "")
	if err := b.client.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	actors := map[string][]string{}
	evs, err := b.store.EventList(context.Background(), store.EventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type == "run.created" || e.Type == "run.deduplicated" {
			actors[e.Workflow] = append(actors[e.Workflow], e.Actor)
		}
	}
	if !slices.Equal(actors["website-lead"], []string{"token:form", "token:ops"}) || !slices.Equal(actors["payment"], []string{"webhook:payments"}) {
		t.Fatalf("start events' actors %v", actors)
	}
}

// A captured signed delivery replayed with a fresh Idempotency-Key header starts nothing:
// a webhook's run key comes from what the signature covers (the provider's event id),
// never from a header nobody signed — for every scheme.
func TestWebhookReplayWithAFreshIdempotencyKeyStartsNothing(t *testing.T) {
	for _, sc := range []struct{ scheme, eventID string }{
		{"stripe", `"{input.id}"`}, {"standard-webhooks", `""`}, {"github", `"{input.id}"`}, {"hmac", `"{input.id}"`},
	} {
		t.Run(sc.scheme, func(t *testing.T) {
			b := setup(t, fmt.Sprintf(paymentYAML, "payments", sc.scheme, sc.eventID))
			scheme, err := signature.ParseScheme(sc.scheme)
			if err != nil {
				t.Fatal(err)
			}
			cfg := signature.Config{Scheme: scheme, Secrets: []string{b.env["HOOK_SECRET"]}, Header: "X-Signature", Prefix: "sha256="}
			if scheme != signature.HMAC {
				cfg.Header, cfg.Prefix = "", ""
			}
			event := `{"id": "evt_7", "type": "payment_intent.succeeded", "data": {"object": {"metadata": {"order_id": "7"}}}}`
			h, err := signature.Sign(cfg, 0, "evt_7", b.now, []byte(event))
			if err != nil {
				t.Fatal(err)
			}
			captured := map[string]string{}
			for k := range h {
				captured[k] = h.Get(k)
			}
			first := b.do("POST", "/hooks/payments", "", captured, event)
			wantStatus(t, first, http.StatusOK, "")
			for i, key := range []string{"replay-1", "replay-2"} {
				replayed := map[string]string{"Idempotency-Key": key}
				for k, v := range captured {
					replayed[k] = v
				}
				again := b.do("POST", "/hooks/payments", "", replayed, event)
				wantStatus(t, again, http.StatusOK, "")
				if again.json["duplicate"] != true || again.json["run_id"] != first.json["run_id"] || again.json["event_id"] != first.json["event_id"] {
					t.Fatalf("replay %d with Idempotency-Key %s: %s, want the first delivery's run (%s)", i+1, key, again.body, first.body)
				}
			}
			if runs := b.runs(); len(runs) != 1 {
				t.Fatalf("%d runs after a delivery and its replays, want 1", len(runs))
			}
		})
	}
}

// A workflow a webhook feeds is started by the provider's signed deliveries, not by API
// tokens: a token that could post to it would go around the signature. Its file opens it
// with api: true.
func TestWebhookWorkflowIsClosedToTokens(t *testing.T) {
	b := setup(t, fmt.Sprintf(paymentYAML, "payments", "hmac", `"{input.id}"`))
	body := `{"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"metadata": {"order_id": "1001"}}}}`
	for _, token := range []string{ingestToken, adminToken} {
		a := b.do("POST", "/v1/workflows/payment/runs", token, map[string]string{"Idempotency-Key": "forged-1"}, body)
		wantStatus(t, a, http.StatusForbidden, "start-refused")
		if d, _ := a.json["detail"].(string); !strings.Contains(d, "started by its webhook, not by API tokens") || !strings.Contains(d, "api: true") {
			t.Fatalf("detail %q", d)
		}
	}
	if n := len(b.runs()); n != 0 {
		t.Fatalf("%d runs started by tokens on a webhook's workflow", n)
	}

	opened := setup(t, fmt.Sprintf(paymentYAML, "payments", "hmac", `"{input.id}"`)+"api: true\n")
	wantStatus(t, opened.do("POST", "/v1/workflows/payment/runs", ingestToken, map[string]string{"Idempotency-Key": "ops-1"}, body), http.StatusCreated, "")
}
