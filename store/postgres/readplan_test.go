package postgres

import (
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/store"
)

// TestAuditFilterPlans checks that the audit trail filtered as the console's audit page
// filters it — by actor, by workflow, by type, newest first, a page before an event —
// reaches every table through an index condition in a schema holding 20,000 steps (a
// fifth of them done) and 200,000 stored events, analyzed: the stored events through the
// indexes of migration 0016, the derived ones by who started the run or recorded the
// attempt (0016) or in the order of their ID columns, each arm stopping at the page's
// limit. (A workflow the planner finds few runs of may be joined to the attempts by a hash
// of those runs instead; this checks a busy one.)
func TestAuditFilterPlans(t *testing.T) {
	t.Parallel()
	url := testsvc.Postgres(t)
	_, schema := testsvc.PostgresSchema(t, "onceflow_audit_plans_")
	s := openLogged(t, url, schema, nil)
	grow(t, s, 20_000)
	s.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	conn := planConn(t, url, schema)
	// 200,000 stored events of people and of the engine, as reviews, pauses and retries
	// append them, among 20 workflows and 50 actors.
	if _, err := conn.Exec(t.Context(), `INSERT INTO events (at, type, workflow, actor, detail)
		SELECT $1, (ARRAY['step.retry_scheduled', 'review.retried', 'workflow.paused', 'data.unmasked'])[1 + i % 4], 'wf-' || (i % 20),
			'user:' || (i % 50), '{}' FROM generate_series(1, 200000) AS i`, now); err != nil {
		t.Fatal(err)
	}
	analyze(t, url, schema)
	const before = 1 << 40
	for name, p := range map[string]store.EventListParams{
		"newest":   {Newest: true, BeforeID: before, Limit: 50},
		"actor":    {Actor: "user:3", Newest: true, BeforeID: before, Limit: 50},
		"engine":   {Actor: "engine", Newest: true, BeforeID: before, Limit: 50},
		"workflow": {Workflow: planWorkflow, Newest: true, BeforeID: before, Limit: 50},
		"type":     {Types: []store.EventType{store.EventRunCancelled}, Newest: true, BeforeID: before, Limit: 50},
		"run":      {RunID: 17, Newest: true, Limit: 50},
		"all of them": {Actor: "user:3", Workflow: "wf-2", Types: []store.EventType{store.EventDataUnmasked}, Since: now.Add(-time.Hour),
			Until: now.Add(time.Hour), Newest: true, BeforeID: before, Limit: 50},
	} {
		sql, args := eventsSQL(p, nil, before)
		plan, err := customPlan(t.Context(), conn, sql, args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, bad := range fullReads(plan) {
			t.Errorf("the audit trail filtered by %s reads %s\n%s", name, bad, plan)
		}
	}
}
