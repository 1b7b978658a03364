package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// queryPlan returns the steps of SQLite's plan for q with args.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var node, parent, unused int
		var detail string
		if err := rows.Scan(&node, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestReadPathPlans checks that each arm of EventList (a source of stored or derived
// events) finds its rows through an index, in ID order, for each filter: its cost follows
// the events it returns, not the history stored. The arms over the steps in flight (as
// few as the workers) and those of one run's or one entity's attempts may sort what they
// found; only an unfiltered list walks a table, in ID order, and stops at its limit.
func TestReadPathPlans(t *testing.T) {
	t.Parallel()
	s := tempStore(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		p    store.EventListParams
		// bounded: the filter bounds the rows an arm reads (a run, an entity).
		bounded bool
		// ordered: the filter is on the stored events an index search and on the derived
		// ones a condition checked while the arm is read in ID order, up to the limit.
		ordered bool
	}{
		{"all", store.EventListParams{}, false, false},
		{"after", store.EventListParams{AfterID: 10}, false, false},
		{"run", store.EventListParams{RunID: 7, AfterID: 10}, true, false},
		{"entity", store.EventListParams{Entity: "lead:1", AfterID: 10}, true, false},
		{"key", store.EventListParams{EffectKey: "k", AfterID: 10}, true, false},
		{"since", store.EventListParams{Since: now}, false, false},
		{"until", store.EventListParams{Until: now}, false, false},
		{"since and until", store.EventListParams{Since: now, Until: now.Add(time.Hour), AfterID: 10}, false, false},
		{"actor", store.EventListParams{Actor: "user:ana", Newest: true, BeforeID: 99}, false, false},
		{"workflow", store.EventListParams{Workflow: "crm", Newest: true, BeforeID: 99}, false, true},
		{"type", store.EventListParams{Types: []store.EventType{store.EventRunCancelled}, Newest: true, BeforeID: 99}, false, false},
		{"newest", store.EventListParams{Newest: true, BeforeID: 99}, false, false},
		{"run newest", store.EventListParams{RunID: 7, Newest: true}, true, false},
	} {
		arms, args := eventArmsSQL(tc.p, nil, 0)
		order := " ORDER BY 1"
		if tc.p.Newest {
			order += " DESC"
		}
		for i, q := range arms {
			plan := queryPlan(t, s, q+order, args[i]...)
			stored := strings.HasPrefix(q, "SELECT e.id,")
			inFlight := false
			for _, step := range plan {
				inFlight = inFlight || strings.Contains(step, "steps_inflight")
			}
			for _, step := range plan {
				scan := strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, "VIRTUAL TABLE")
				sort := strings.Contains(step, "TEMP B-TREE")
				scanAllowed := tc.name == "all" || tc.name == "newest" || (tc.ordered && !stored)
				if (scan && !scanAllowed) || (sort && !inFlight && !tc.bounded) {
					t.Errorf("EventList %s, arm %d: plan %q: %q reads more than an index range", tc.name, i, plan, step)
				}
			}
			t.Logf("EventList %s, arm %d: %q", tc.name, i, plan)
		}
	}
}
