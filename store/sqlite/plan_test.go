package sqlite

import (
	"strings"
	"testing"
)

// TestWritePathPlans checks that no statement of the write path scans a table or sorts:
// each finds its rows through an index, so its cost does not grow with the history stored.
func TestWritePathPlans(t *testing.T) {
	t.Parallel()
	s := tempStore(t)
	for id, q := range stmtSQL {
		if strings.HasPrefix(strings.TrimSpace(q), "INSERT") && !strings.Contains(q, "SELECT") {
			continue // plain inserts have no plan to check
		}
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = "[1]"
		}
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("statement %d: %v", id, err)
		}
		var plan []string
		for rows.Next() {
			var node, parent, unused int
			var detail string
			if err := rows.Scan(&node, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		// The reaper's scans walk the attempts in flight, as few as the workers, and may
		// sort them.
		inFlight := strings.Contains(strings.Join(plan, " "), "steps_inflight")
		// SQLite reads a bound LIMIT when it plans, so a statement with one is prepared again
		// whenever the value changes: one that reads an index in order stops reading instead.
		if strings.Contains(q, "LIMIT ?") && !strings.Contains(strings.Join(plan, " "), "TEMP B-TREE") {
			t.Errorf("statement %d %q binds its LIMIT but sorts nothing: stop reading after the rows wanted", id, strings.Join(strings.Fields(q), " "))
		}
		for _, step := range plan {
			scan := strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, "VIRTUAL TABLE")
			if scan || (strings.Contains(step, "TEMP B-TREE") && !inFlight) {
				t.Errorf("statement %d %q\nplan %q: %q reads more than an index range", id, strings.Join(strings.Fields(q), " "), plan, step)
			}
		}
	}
}
