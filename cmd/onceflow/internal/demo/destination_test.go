package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"strings"
	"testing"
	"time"
)

// keyWithFault returns an idempotency key whose first request to dest gets f under plan,
// and whose second gets none.
func keyWithFault(t *testing.T, plan faultPlan, dest, prefix string, f fault) string {
	t.Helper()
	for i := range 10000 {
		k := fmt.Sprintf("%s%d", prefix, i)
		if plan.pick(dest, k, 1) == f && plan.pick(dest, k, 2) == faultNone {
			return k
		}
	}
	t.Fatalf("no key gets %v from %s", f, dest)
	return ""
}

var testTokens = map[string]string{"CRM_TOKEN": "crm-secret", "WHATSAPP_TOKEN": "wa-secret", "INVOICING_TOKEN": "inv-secret"}

func startTestDestinations(t *testing.T) (*destinations, faultPlan) {
	t.Helper()
	plan := faultPlan{seed: 7}
	ds, err := startDestinations(plan, 5*time.Second, testTokens)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ds.close(); err != nil {
			t.Error(err)
		}
	})
	return ds, plan
}

// testClient sends one request per connection, as onceflow's steps see the destinations.
func testClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

type reply struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, c *http.Client, method, url, token, key string, body any) (*reply, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func postLead(t *testing.T, c *http.Client, ds *destinations, key, externalID string) (*reply, error) {
	t.Helper()
	return send(t, c, http.MethodPost, ds.crm.url+"/leads", testTokens["CRM_TOKEN"], key, map[string]any{"external_id": externalID, "name": "Ada"})
}

func TestDestinationDeduplicatesByKey(t *testing.T) {
	t.Parallel()
	ds, plan := startTestDestinations(t)
	c := testClient(time.Second)
	key := keyWithFault(t, plan, "crm", "lead-create:", faultNone)
	first, err := postLead(t, c, ds, key, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := postLead(t, c, ds, key, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	if first.status != http.StatusCreated || second.body != first.body || second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a repeated key got %d %s (replayed %q) after %d %s", second.status, second.body, second.header.Get("Idempotent-Replayed"), first.status, first.body)
	}
	s := ds.crm.Stats()
	if s.Requests != 2 || s.EffectsApplied != 1 || s.RepeatedKeys != 1 || s.KeyReplays != 1 || s.DuplicateEffects != 0 {
		t.Fatalf("stats = %+v", s)
	}
	if a := ds.crm.applied(); a.keys[key] != "lead web-1" || a.actions["lead web-1"] != 1 {
		t.Fatalf("applied = %+v", a)
	}
}

// The duplicate count judges by the business identity, not the key: the same lead under
// two keys is a duplicate. Without this the demo's central check would prove nothing.
func TestDestinationCountsDuplicatesByBusinessID(t *testing.T) {
	t.Parallel()
	ds, plan := startTestDestinations(t)
	c := testClient(time.Second)
	for _, prefix := range []string{"a:", "b:"} {
		if _, err := postLead(t, c, ds, keyWithFault(t, plan, "crm", prefix, faultNone), "web-1"); err != nil {
			t.Fatal(err)
		}
	}
	if s := ds.crm.Stats(); s.EffectsApplied != 1 || s.DuplicateEffects != 1 || s.RepeatedKeys != 0 {
		t.Fatalf("stats = %+v; want 1 lead applied and 1 duplicate", s)
	}
}

func TestDestinationFaults(t *testing.T) {
	t.Parallel()
	ds, plan := startTestDestinations(t)
	c := testClient(300 * time.Millisecond)
	tests := []struct {
		fault      fault
		status     int // 0: no answer
		retryAfter string
		applied    int
	}{
		{faultUnavailable, http.StatusServiceUnavailable, "", 0},
		{faultRateLimited, http.StatusTooManyRequests, "1", 0},
		{faultDropAfterApply, 0, "", 1},
		{faultSlowAfterApply, 0, "", 1},
	}
	for i, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			key := keyWithFault(t, plan, "crm", "lead-create:", tt.fault)
			id := fmt.Sprintf("web-%d", i)
			r, err := postLead(t, c, ds, key, id)
			switch {
			case tt.status == 0 && err == nil:
				t.Fatalf("answered %d; want no answer", r.status)
			case tt.status != 0 && err != nil:
				t.Fatal(err)
			case tt.status != 0 && (r.status != tt.status || r.header.Get("Retry-After") != tt.retryAfter):
				t.Fatalf("answered %d, Retry-After %q; want %d, %q", r.status, r.header.Get("Retry-After"), tt.status, tt.retryAfter)
			case tt.fault == faultSlowAfterApply && !isTimeout(err):
				t.Fatalf("err = %v; want the client's timeout", err)
			}
			if n := ds.crm.applied().actions["lead "+id]; n != tt.applied {
				t.Errorf("applied %d times, want %d", n, tt.applied)
			}
			// The retry with the same key succeeds and applies nothing more.
			r, err = postLead(t, c, ds, key, id)
			if err != nil || r.status != http.StatusCreated {
				t.Fatalf("retry: %v %+v", err, r)
			}
			if n := ds.crm.applied().actions["lead "+id]; n != 1 {
				t.Errorf("after the retry: applied %d times, want 1", n)
			}
		})
	}
	if s := ds.crm.Stats(); s.FaultsInjected != 4 || s.DuplicateEffects != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// The CRM's verify lookup finds a lead by external id once it exists.
func TestCRMLookup(t *testing.T) {
	t.Parallel()
	ds, plan := startTestDestinations(t)
	c := testClient(time.Second)
	find := func() *reply {
		r, err := send(t, c, http.MethodGet, ds.crm.url+"/leads/by-external-id/web-9", testTokens["CRM_TOKEN"], "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := find(); r.status != http.StatusNotFound {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	created, err := postLead(t, c, ds, keyWithFault(t, plan, "crm", "lead-create:", faultNone), "web-9")
	if err != nil {
		t.Fatal(err)
	}
	if r := find(); r.status != http.StatusOK || r.body != created.body {
		t.Fatalf("after: %d %s; want 200 %s", r.status, r.body, created.body)
	}
	if s := ds.crm.Stats(); s.VerifyProbes != 2 || s.EffectsApplied != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestDestinationsRefuse(t *testing.T) {
	t.Parallel()
	ds, plan := startTestDestinations(t)
	c := testClient(time.Second)
	key := keyWithFault(t, plan, "whatsapp", "whatsapp-notice:", faultNone)
	msg := map[string]any{"to": unreachablePrefix + "0100004", "template": "lead_welcome"}
	r, err := send(t, c, http.MethodPost, ds.whatsapp.url+"/messages", testTokens["WHATSAPP_TOKEN"], key, msg)
	if err != nil || r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "not a WhatsApp user") {
		t.Fatalf("unreachable number: %v %+v", err, r)
	}
	r, err = send(t, c, http.MethodPost, ds.whatsapp.url+"/messages", "wrong", key, msg)
	if err != nil || r.status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %v %+v", err, r)
	}
	r, err = send(t, c, http.MethodPost, ds.stock.url+"/reservations", "", "", map[string]any{"order_id": "5001"})
	if err != nil || r.status != http.StatusBadRequest {
		t.Fatalf("no key: %v %+v", err, r)
	}
	if s := ds.whatsapp.Stats(); s.EffectsApplied != 0 || s.Rejected != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

// sendMail submits one message as the e-mail step does: the Message-ID and the effect key
// in headers.
func sendMail(addr, key, to, subject string) error {
	msg := "From: shop@acme.example\r\nTo: " + to + "\r\nSubject: " + subject + "\r\nMessage-ID: <" + key + "@onceflow>\r\n" +
		"X-Onceflow-Effect-Key: " + key + "\r\n\r\nHello.\r\n"
	return smtp.SendMail(addr, nil, "shop@acme.example", []string{to}, []byte(msg))
}

// The mail server does not deduplicate: a message sent twice is delivered twice, and
// counted as a duplicate.
func TestMailboxDeliversEveryMessage(t *testing.T) {
	t.Parallel()
	ds, plan := startTestDestinations(t)
	key := keyWithFault(t, plan, "smtp", "payment-receipt:", faultNone)
	for range 2 {
		if err := sendMail(ds.mail.addr, key, "ana@example.com", "Payment received for order 5001"); err != nil {
			t.Fatal(err)
		}
	}
	s := ds.mail.Stats()
	if s.Requests != 2 || s.EffectsApplied != 1 || s.DuplicateEffects != 1 || s.RepeatedKeys != 1 || s.Deduplicates {
		t.Fatalf("stats = %+v", s)
	}
	if a := ds.mail.applied(); a.actions["e-mail to ana@example.com: Payment received for order 5001"] != 2 {
		t.Fatalf("applied = %+v", a)
	}
}

func TestMailboxFaults(t *testing.T) {
	t.Parallel()
	ds, plan := startTestDestinations(t)
	// 451 after the message: nothing delivered; the retry is.
	key := keyWithFault(t, plan, "smtp", "welcome-email:", faultUnavailable)
	if err := sendMail(ds.mail.addr, key, "bo@example.com", "Welcome"); err == nil || !strings.Contains(err.Error(), "451") {
		t.Fatalf("err = %v; want 451", err)
	}
	if err := sendMail(ds.mail.addr, key, "bo@example.com", "Welcome"); err != nil {
		t.Fatal(err)
	}
	// A welcome e-mail delivered without a reply.
	drop := keyWithFault(t, plan, "smtp", "welcome-email:", faultDropAfterApply)
	if err := sendMail(ds.mail.addr, drop, "cy@example.com", "Welcome"); err == nil {
		t.Fatal("a dropped reply looked like success")
	}
	// Receipts are never dropped (see mailbox).
	receipt := keyWithFault(t, plan, "smtp", "payment-receipt:", faultDropAfterApply)
	if err := sendMail(ds.mail.addr, receipt, "di@example.com", "Receipt"); err != nil {
		t.Fatal(err)
	}
	s := ds.mail.Stats()
	if s.EffectsApplied != 3 || s.DuplicateEffects != 0 || s.FaultsInjected != 2 || s.Faults[faultTempFailure.String()] != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestFaultPlanIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := faultPlan{seed: 1}, faultPlan{seed: 1}
	other := faultPlan{seed: 2}
	differs := false
	counts := map[fault]int{}
	for i := range 2000 {
		key := fmt.Sprintf("lead-create:web-%d", i)
		for n := 1; n <= 3; n++ {
			f := a.pick("crm", key, n)
			if f != b.pick("crm", key, n) {
				t.Fatalf("same seed, different fault for %s #%d", key, n)
			}
			if n == 3 && f != faultNone {
				t.Fatalf("third request for %s got %v; only the first two may fail", key, f)
			}
			if f != other.pick("crm", key, n) {
				differs = true
			}
			if n == 1 {
				counts[f]++
			}
		}
	}
	if !differs {
		t.Error("seeds 1 and 2 inject the same faults")
	}
	for _, f := range []fault{faultUnavailable, faultRateLimited, faultDropAfterApply, faultSlowAfterApply} {
		if counts[f] == 0 {
			t.Errorf("fault %v never chosen in 2000 keys", f)
		}
	}
}
