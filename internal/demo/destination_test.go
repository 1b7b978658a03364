package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
)

// keyWithFault returns an idempotency key whose first request to dest gets f under plan,
// and whose later requests get none.
func keyWithFault(t *testing.T, plan faultPlan, dest string, f fault) string {
	t.Helper()
	for i := range 10000 {
		k := fmt.Sprintf("key-%d", i)
		if plan.pick(dest, k, 1) == f && plan.pick(dest, k, 2) == faultNone {
			return k
		}
	}
	t.Fatalf("no key gets %v from %s", f, dest)
	return ""
}

func startCRM(t *testing.T) (*destinations, faultPlan) {
	t.Helper()
	ds, err := startDestinations(7, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ds.close(); err != nil {
			t.Error(err)
		}
	})
	return ds, faultPlan{seed: 7}
}

func postLead(t *testing.T, p *poster, ds *destinations, key, sid string) (any, error) {
	t.Helper()
	sc := &onceflow.StepContext{EffectKey: key}
	return p.post(context.Background(), sc, "crm", ds.crm.url+"/leads", map[string]any{"submission_id": sid, "name": "Ada"})
}

func TestDestinationDeduplicatesByKey(t *testing.T) {
	t.Parallel()
	ds, plan := startCRM(t)
	p := newPoster(time.Second)
	defer p.close()
	key := keyWithFault(t, plan, "crm", faultNone)

	first, err := postLead(t, p, ds, key, "sub-1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := postLead(t, p, ds, key, "sub-1")
	if err != nil {
		t.Fatal(err)
	}
	if string(first.(json.RawMessage)) != string(second.(json.RawMessage)) {
		t.Fatalf("a repeated key got a different answer: %s then %s", first, second)
	}
	s := ds.crm.Stats()
	if s.Requests != 2 || s.EffectsApplied != 1 || s.KeyReplays != 1 || s.DuplicateEffects != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// The duplicate count judges by the business id, not the key: the same lead under two keys
// is a duplicate. Without this the demo's central check would prove nothing.
func TestDestinationCountsDuplicatesByBusinessID(t *testing.T) {
	t.Parallel()
	ds, plan := startCRM(t)
	p := newPoster(time.Second)
	defer p.close()
	var keys []string
	for i := 0; len(keys) < 2; i++ {
		if k := fmt.Sprintf("key-%d", i); plan.pick("crm", k, 1) == faultNone {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if _, err := postLead(t, p, ds, k, "sub-1"); err != nil {
			t.Fatal(err)
		}
	}
	if s := ds.crm.Stats(); s.EffectsApplied != 2 || s.DuplicateEffects != 1 {
		t.Fatalf("stats = %+v; want 2 effects applied and 1 duplicate", s)
	}
}

func TestFaultsAreClassified(t *testing.T) {
	t.Parallel()
	ds, plan := startCRM(t)
	p := newPoster(200 * time.Millisecond)
	defer p.close()
	tests := []struct {
		fault      fault
		class      onceflow.ErrorClass
		status     int
		retryAfter time.Duration
		applied    int
	}{
		{faultUnavailable, onceflow.Retryable, http.StatusServiceUnavailable, 0, 0},
		{faultRateLimited, onceflow.Retryable, http.StatusTooManyRequests, time.Second, 0},
		{faultDropAfterApply, onceflow.Unknown, 0, 0, 1},
		{faultSlowAfterApply, onceflow.Unknown, 0, 0, 1},
	}
	for i, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			key := keyWithFault(t, plan, "crm", tt.fault)
			sid := fmt.Sprintf("sub-%d", i)
			_, err := postLead(t, p, ds, key, sid)
			if err == nil {
				t.Fatal("no error")
			}
			if c := onceflow.ClassOf(err); c != tt.class {
				t.Fatalf("class %s, want %s (%v)", c, tt.class, err)
			}
			var se *onceflow.StepError
			if errors.As(err, &se) && (se.ResponseStatus != tt.status || se.RetryAfter != tt.retryAfter) {
				t.Errorf("status %d retry after %v; want %d and %v", se.ResponseStatus, se.RetryAfter, tt.status, tt.retryAfter)
			}
			if n := ds.crm.applied("lead", sid); n != tt.applied {
				t.Errorf("applied %d times, want %d", n, tt.applied)
			}
		})
	}
}

func TestChatRejectsUnreachableNumbers(t *testing.T) {
	t.Parallel()
	ds, _ := startCRM(t)
	p := newPoster(time.Second)
	defer p.close()
	// The 422 comes before any fault only when the request gets past the fault plan; the
	// rejection does not depend on the key, so try keys until one is not faulted.
	var err error
	for i := range 20 {
		sc := &onceflow.StepContext{EffectKey: fmt.Sprintf("whatsapp-notice:%d", i)}
		_, err = p.post(context.Background(), sc, "chat", ds.chat.url+"/messages",
			map[string]any{"submission_id": "sub-1", "to": unreachablePrefix + "5550001", "text": "hi"})
		if onceflow.ClassOf(err) == onceflow.Permanent {
			break
		}
	}
	var se *onceflow.StepError
	if !errors.As(err, &se) || se.Class != onceflow.Permanent || se.ResponseStatus != http.StatusUnprocessableEntity {
		t.Fatalf("err = %#v; want a permanent 422", err)
	}
	if s := ds.chat.Stats(); s.EffectsApplied != 0 || s.Rejected == 0 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestClassifyResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status     int
		retryAfter string
		class      onceflow.ErrorClass // "" for success
		after      time.Duration
	}{
		{200, "", "", 0},
		{201, "", "", 0},
		{204, "", "", 0},
		{400, "", onceflow.Permanent, 0},
		{404, "", onceflow.Permanent, 0},
		{409, "", onceflow.Permanent, 0},
		{422, "", onceflow.Permanent, 0},
		{408, "", onceflow.Retryable, 0},
		{425, "", onceflow.Retryable, 0},
		{429, "3", onceflow.Retryable, 3 * time.Second},
		{500, "", onceflow.Retryable, 0},
		{502, "junk", onceflow.Retryable, 0},
		{503, "0", onceflow.Retryable, 0},
		{504, "-1", onceflow.Retryable, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.retryAfter != "" {
			h.Set("Retry-After", tt.retryAfter)
		}
		out, err := classifyResponse("dest", tt.status, h, []byte(`{"ok":true}`))
		if tt.class == "" {
			if err != nil || string(out.(json.RawMessage)) != `{"ok":true}` {
				t.Errorf("%d: out %v err %v; want the body", tt.status, out, err)
			}
			continue
		}
		var se *onceflow.StepError
		if !errors.As(err, &se) || se.Class != tt.class || se.RetryAfter != tt.after || se.ResponseStatus != tt.status {
			t.Errorf("%d (Retry-After %q): %#v; want class %s after %v", tt.status, tt.retryAfter, err, tt.class, tt.after)
		}
	}
}

func TestRetryAfterDate(t *testing.T) {
	t.Parallel()
	when := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if d := retryAfter(when); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("retryAfter(%q) = %v; want about an hour", when, d)
	}
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	if d := retryAfter(past); d != 0 {
		t.Fatalf("retryAfter(past) = %v; want 0", d)
	}
}

func TestFaultPlanIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := faultPlan{seed: 1}, faultPlan{seed: 1}
	other := faultPlan{seed: 2}
	differs := false
	counts := map[fault]int{}
	for i := range 2000 {
		key := fmt.Sprintf("lead-create:sub-%d", i)
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

func TestSubmissions(t *testing.T) {
	t.Parallel()
	subs := submissions(40)
	keys := map[string]bool{}
	resubmits, corrected, unreachable := 0, 0, 0
	for i, s := range subs {
		if keys[s.RunKey] {
			t.Fatalf("run key %s used twice", s.RunKey)
		}
		keys[s.RunKey] = true
		if s.Resubmits >= 0 {
			resubmits++
			prev := subs[s.Resubmits].Form
			if prev.SubmissionID != s.Form.SubmissionID {
				t.Errorf("submission %d repeats %d but has another submission id", i, s.Resubmits)
			}
			if s.Corrected {
				corrected++
				if prev == s.Form {
					t.Errorf("submission %d is marked corrected but equals %d", i, s.Resubmits)
				}
			} else if prev != s.Form {
				t.Errorf("submission %d repeats %d with other data", i, s.Resubmits)
			}
		}
		if len(s.Form.Phone) > 4 && s.Form.Phone[:4] == unreachablePrefix && s.Resubmits < 0 {
			unreachable++
		}
	}
	if resubmits != 5 || corrected != 1 || unreachable == 0 {
		t.Fatalf("resubmits %d corrected %d unreachable %d", resubmits, corrected, unreachable)
	}
}
