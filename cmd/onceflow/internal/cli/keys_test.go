package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// keys show answers with its exit status, so that a script can ask "did this happen?":
// 0 completed, 3 in flight, 4 never seen, 5 released; --json carries the same answer.
func TestKeysShowExitStatus(t *testing.T) {
	t.Parallel()
	f := setup(t) // notify:1001 completed; charge:1001 refused for good, so released

	// Another run whose first step a worker holds right now: its key is in flight.
	ctx := context.Background()
	st := openSQLite(t, strings.TrimPrefix(f.db, "sqlite://"))
	now := time.Now()
	if _, _, err := st.RunInsert(ctx, store.RunInsertParams{Workflow: "order-paid", RunKey: "evt-1002", Input: json.RawMessage(`{"order_id":1002}`),
		InputHash: "h", Steps: []store.StepInsert{{Name: "notify"}}, Actor: "test", Now: now}); err != nil {
		t.Fatal(err)
	}
	res, err := st.StepClaim(ctx, store.StepClaimParams{Owner: "busy-worker", Now: now, LeaseFor: time.Hour, Limit: 1, Workflows: []string{"order-paid"},
		Prepare: func(*store.ClaimCandidate) (store.EffectSpec, error) {
			return store.EffectSpec{Key: "notify:1002"}, nil
		}})
	if err != nil || len(res.Claimed) != 1 {
		t.Fatalf("claim: %v %v", res, err)
	}
	st.Close()

	for _, tc := range []struct {
		key, status, text string
		code              int
	}{
		{"notify:1001", "completed", "key notify:1001: completed", 0},
		{"notify:1002", "in_flight", "key notify:1002: in flight", 3},
		{"never:1", "never_seen", "key never:1: never seen", 4},
		{"charge:1001", "released", "key charge:1001: released", 5},
	} {
		r := run(t, "keys", "show", tc.key, "--db", f.db)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.text) || r.stderr != "" {
			t.Errorf("keys show %s: exit %d (want %d), stderr %q, stdout:\n%s", tc.key, r.code, tc.code, r.stderr, r.stdout)
		}
		r = run(t, "keys", "show", tc.key, "--db", f.db, "--json")
		var out struct{ Status, State string }
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != tc.code || out.Status != tc.status {
			t.Errorf("keys show %s --json: exit %d, %v, %s", tc.key, r.code, err, r.stdout)
		}
	}
	// An error is still 1 and a bad key 2, never mistaken for an answer.
	if r := run(t, "keys", "show", " padded", "--db", f.db); r.code != exitUsage {
		t.Errorf("bad key: exit %d", r.code)
	}
}
