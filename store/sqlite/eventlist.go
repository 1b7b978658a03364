package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/onceflow/onceflow/store"
)

// The audit trail is the events stored in events merged, by ID, with the events derived
// from the rows that hold their facts (store/derive.go, migration 0011): a run's creation
// (runs), the claim of an attempt in flight and the run state change it made (steps), the
// claim and the end of an attempt that ended and the run state changes that followed them
// (attempts). EventList reads them all with one statement, one arm per source, each in
// the order of its ID column with the filters applied within it, so that SQLite merges the
// arms in ID order and stops at the limit, and one snapshot shows an event that moved from
// a step row to an attempt row exactly once.

// Kinds of the rows of eventListSQL.
const (
	armStored = iota
	armRunCreated
	armClaimEnded
	armClaimInFlight
	armEnd
	armClaimRunEnded
	armClaimRunInFlight
	armEndRun
)

// entityAt is the entity of run r at the time of the event whose ID is the expression id:
// the entity its last correction before the event set, else the entity before its first
// correction, else the run's.
func entityAt(id string) string {
	return `coalesce((SELECT v.entity_after FROM run_revisions v WHERE v.run_id = r.id AND v.event_id < ` + id + ` ORDER BY v.revision DESC LIMIT 1),
		(SELECT v.entity_before FROM run_revisions v WHERE v.run_id = r.id ORDER BY v.revision LIMIT 1), r.entity)`
}

// eventArm is one source of EventList: its SELECT and the columns its filters use.
type eventArm struct {
	kind int
	// sel selects the 17 columns of a row: id, kind, type (stored events), at, run_id, step_id, workflow,
	// entity, step_name, effect_key, attempt, actor, reason, detail and three of the
	// derivation (x1, x2, x3); from names the tables and where the source's condition.
	sel, from, where string
	// id and at are the event's ID and time columns; run its run's, step the step row's
	// ID (attempts: step_id) and entity the column to compare an entity with.
	id, at, run, step string
	// keyed is set for the arms of events that name an effect key (key: its column).
	key string
	// stepIDs is set for the arms on attempts: a run's or a key's rows are found through
	// their steps.
	viaSteps bool
	// actor is the column of the event's actor, or a quoted constant when every event of
	// the arm has the same actor.
	actor string
	// workflow is the column of the event's workflow. On the derived arms both are read
	// from the run (with a unary + that keeps SQLite off the runs' workflow index): the
	// arm is read in the order of its ID column and stops at the limit.
	workflow string
}

var eventArms = []eventArm{
	{kind: armStored, sel: `e.id, 0, e.type, e.at, e.run_id, e.step_id, e.workflow, e.entity, e.step_name, e.effect_key, e.attempt, e.actor, e.reason, e.detail, NULL, NULL, NULL`,
		from: `events e`, where: `1`, id: `e.id`, at: `e.at`, run: `e.run_id`, key: `e.effect_key`, actor: `e.actor`, workflow: `e.workflow`},
	{kind: armRunCreated, sel: `r.created_event_id, 1, '', r.created_at, r.id, 0, r.workflow, ` + entityAt(`r.created_event_id`) + `, '', '', 0, r.created_by, '', NULL,
		r.run_key, r.created_steps, NULL`,
		from: `runs r`, where: `r.created_event_id IS NOT NULL`, id: `r.created_event_id`, at: `r.created_at`, run: `r.id`, actor: `r.created_by`,
		workflow: `+r.workflow`},
	{kind: armClaimEnded, sel: `a.claim_event_id, 2, '', a.started_at, a.run_id, a.step_id, r.workflow, ` + entityAt(`a.claim_event_id`) + `, a.step_name, a.effect_key,
		a.number, 'engine', '', NULL, a.worker, a.lease_until, a.prev_outcome`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.claim_event_id IS NOT NULL`, id: `a.claim_event_id`, at: `a.started_at`,
		step: `a.step_id`, key: `a.effect_key`, viaSteps: true, actor: `'engine'`, workflow: `+r.workflow`},
	{kind: armClaimInFlight, sel: `s.claim_event_id, 3, '', s.claimed_at, s.run_id, s.id, r.workflow, ` + entityAt(`s.claim_event_id`) + `, s.name, s.effect_key,
		s.attempt, 'engine', '', NULL, s.lease_owner, s.claim_lease_until, s.claim_prev_outcome`,
		from: `steps s JOIN runs r ON r.id = s.run_id`, where: `s.claim_event_id > 0`, id: `s.claim_event_id`, at: `s.claimed_at`, run: `s.run_id`, key: `s.effect_key`,
		actor: `'engine'`, workflow: `+r.workflow`},
	{kind: armEnd, sel: `a.id, 4, '', a.ended_at, a.run_id, a.step_id, r.workflow, ` + entityAt(`a.id`) + `, a.step_name, a.effect_key, a.number,
		CASE WHEN a.end_actor <> '' THEN a.end_actor ELSE a.worker END, a.end_reason, NULL, a.outcome, a.response_status, a.error`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.end_derived = 1`, id: `a.id`, at: `a.ended_at`,
		step: `a.step_id`, key: `a.effect_key`, viaSteps: true, actor: endActor, workflow: `+r.workflow`},
	{kind: armClaimRunEnded, sel: `a.claim_run_event_id, 5, '', a.started_at, a.run_id, 0, r.workflow, ` + entityAt(`a.claim_run_event_id`) + `, '', '', 0,
		'engine', '', NULL, a.claim_run_change, NULL, NULL`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.claim_run_event_id IS NOT NULL`, id: `a.claim_run_event_id`, at: `a.started_at`,
		step: `a.step_id`, viaSteps: true, actor: `'engine'`, workflow: `+r.workflow`},
	{kind: armClaimRunInFlight, sel: `s.claim_run_event_id, 6, '', s.claimed_at, s.run_id, 0, r.workflow, ` + entityAt(`s.claim_run_event_id`) + `, '', '', 0,
		'engine', '', NULL, s.claim_run_change, NULL, NULL`,
		from: `steps s JOIN runs r ON r.id = s.run_id`, where: `s.claim_event_id > 0 AND s.claim_run_event_id IS NOT NULL`, id: `s.claim_run_event_id`,
		at: `s.claimed_at`, run: `s.run_id`, actor: `'engine'`, workflow: `+r.workflow`},
	{kind: armEndRun, sel: `a.end_run_event_id, 7, '', a.ended_at, a.run_id, 0, r.workflow, ` + entityAt(`a.end_run_event_id`) + `, '', '', 0,
		CASE WHEN a.end_actor <> '' THEN a.end_actor ELSE a.worker END, '', NULL, a.end_run_change, NULL, NULL`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.end_run_event_id IS NOT NULL`, id: `a.end_run_event_id`, at: `a.ended_at`,
		step: `a.step_id`, viaSteps: true, actor: endActor, workflow: `+r.workflow`},
}

// endActor is the actor of the events derived from an attempt's end: the record's actor,
// or the worker.
const endActor = `CASE WHEN a.end_actor <> '' THEN a.end_actor ELSE a.worker END`

// armTypes are the types of event each derived arm yields.
var armTypes = map[int]store.EventType{
	armRunCreated: store.EventRunCreated, armClaimEnded: store.EventStepClaimed, armClaimInFlight: store.EventStepClaimed,
	armEnd: store.EventStepCompleted, armClaimRunEnded: store.EventRunStateChanged, armClaimRunInFlight: store.EventRunStateChanged,
	armEndRun: store.EventRunStateChanged,
}

// eventListSQL is the statement of EventList and its arguments.
func eventListSQL(p store.EventListParams) (string, []any) {
	return eventsSQL(p, nil, 0)
}

// eventsSQL is the statement of EventList, restricted to events of types (nil: any) and
// IDs up to through (0: any), and its arguments.
func eventsSQL(p store.EventListParams, types []store.EventType, through int64) (string, []any) {
	arms, armArgs := eventArmsSQL(p, types, through)
	var args []any
	for _, a := range armArgs {
		args = append(args, a...)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	order := "\nORDER BY 1 LIMIT ?"
	if p.Newest {
		order = "\nORDER BY 1 DESC LIMIT ?"
	}
	return strings.Join(arms, "\nUNION ALL\n") + order, append(args, limit)
}

// eventArmsSQL returns the SELECT of each arm of eventsSQL and its arguments.
func eventArmsSQL(p store.EventListParams, types []store.EventType, through int64) (arms []string, armArgs [][]any) {
	types = p.KeptTypes(types)
	for _, a := range eventArms {
		var args []any
		if p.EffectKey != "" && a.key == "" {
			continue // its events name no key
		}
		if p.Actor != "" && strings.HasPrefix(a.actor, "'") && a.actor != "'"+p.Actor+"'" {
			continue // its events' actor is another
		}
		if types != nil && a.kind != armStored && !slices.Contains(types, armTypes[a.kind]) {
			continue
		}
		conds := []string{a.where}
		add := func(cond string, v ...any) {
			conds, args = append(conds, cond), append(args, v...)
		}
		if p.RunID > 0 {
			if a.viaSteps {
				add(a.step+` IN (SELECT id FROM steps WHERE run_id = ?)`, p.RunID)
			} else {
				add(a.run+` = ?`, p.RunID)
			}
		}
		if p.Entity != "" {
			if a.kind == armStored {
				add(`e.entity = ? AND e.entity <> ''`, p.Entity)
			} else {
				// The runs that had the entity, then the entity at the event's time.
				runs := `SELECT id FROM runs WHERE entity = ? UNION SELECT run_id FROM run_revisions WHERE entity_before = ?
					UNION SELECT run_id FROM run_revisions WHERE entity_after = ?`
				if a.viaSteps {
					add(a.step+` IN (SELECT id FROM steps WHERE run_id IN (`+runs+`))`, p.Entity, p.Entity, p.Entity)
				} else {
					add(a.run+` IN (`+runs+`)`, p.Entity, p.Entity, p.Entity)
				}
				add(entityAt(a.id)+` = ?`, p.Entity)
			}
		}
		if p.EffectKey != "" {
			add(a.key+` = ? AND `+a.key+` <> ''`, p.EffectKey)
			if a.viaSteps {
				add(a.step+` IN (SELECT id FROM steps WHERE effect_key = ? AND effect_key <> '' UNION SELECT step_id FROM step_keys_used WHERE effect_key = ?)`,
					p.EffectKey, p.EffectKey)
			}
		}
		if !p.Since.IsZero() {
			add(a.id+` >= (SELECT coalesce(min(first_id), 9223372036854775807) FROM audit_spans INDEXED BY audit_spans_max_at WHERE max_at >= ?)`, ts(p.Since))
			add(a.at+` >= ?`, ts(p.Since))
		}
		if !p.Until.IsZero() {
			add(a.id+` <= (SELECT coalesce(max(last_id), 0) FROM audit_spans INDEXED BY audit_spans_min_at WHERE min_at < ?)`, ts(p.Until))
			add(a.at+` < ?`, ts(p.Until))
		}
		if p.AfterID > 0 {
			add(a.id+` > ?`, p.AfterID)
		}
		if p.BeforeID > 0 {
			add(a.id+` < ?`, p.BeforeID)
		}
		if p.Actor != "" && !strings.HasPrefix(a.actor, "'") {
			add(a.actor+` = ?`, p.Actor)
		}
		if p.Workflow != "" {
			add(a.workflow+` = ?`, p.Workflow)
		}
		if through > 0 {
			add(a.id+` <= ?`, through)
		}
		if types != nil && a.kind == armStored {
			conds = append(conds, `e.type IN (`+placeholders(len(types))+`)`)
			for _, t := range types {
				args = append(args, t)
			}
		}
		arms = append(arms, `SELECT `+a.sel+` FROM `+a.from+` WHERE `+strings.Join(conds, " AND "))
		armArgs = append(armArgs, args)
	}
	return arms, armArgs
}

// EventList implements store.Store: the stored and derived events, merged by ID, with one
// statement (one snapshot). Each arm finds its rows through an index in ID order: the
// partial indexes on entity and effect key because the conditions repeat their
// predicates; a time range as the range of IDs that the audit spans of the transactions
// with events in it cover, then the exact times within it.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]*store.Event, error) {
	q, args := eventListSQL(p)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: event list: %w", err)
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		e, err := scanListedEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: event list: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// scanListedEvent scans a row of eventListSQL and builds its event.
func scanListedEvent(sc scanner) (*store.Event, error) {
	var e store.Event
	var kind int
	var at int64
	var d, x1, x3 sql.NullString
	var x2 sql.NullInt64
	if err := sc.Scan(&e.ID, &kind, &e.Type, &at, &e.RunID, &e.StepID, &e.Workflow, &e.Entity, &e.StepName, &e.EffectKey, &e.Attempt, &e.Actor, &e.Reason,
		&d, &x1, &x2, &x3); err != nil {
		return nil, err
	}
	e.At = fromTS(at)
	switch kind {
	case armStored:
		e.Detail = json.RawMessage(d.String)
		return &e, nil
	case armRunCreated:
		return (&store.RunCreatedSource{EventID: e.ID, RunID: e.RunID, Workflow: e.Workflow, RunKey: x1.String, Entity: e.Entity, Actor: e.Actor,
			Steps: int(x2.Int64), At: e.At}).Event(), nil
	case armClaimEnded, armClaimInFlight:
		return (&store.ClaimSource{EventID: e.ID, RunID: e.RunID, StepID: e.StepID, Workflow: e.Workflow, Entity: e.Entity, Step: e.StepName,
			Key: e.EffectKey, Worker: x1.String, Attempt: e.Attempt, At: e.At, LeaseUntil: fromTS(x2.Int64), PrevOutcome: store.Outcome(x3.String)}).Event(), nil
	case armEnd:
		return (&store.EndSource{EventID: e.ID, RunID: e.RunID, StepID: e.StepID, Workflow: e.Workflow, Entity: e.Entity, Step: e.StepName,
			Key: e.EffectKey, Actor: e.Actor, Reason: e.Reason, Error: x3.String, Attempt: e.Attempt, ResponseStatus: int(x2.Int64),
			Outcome: store.Outcome(x1.String), At: e.At}).Event(), nil
	case armClaimRunEnded, armClaimRunInFlight, armEndRun:
		from, to, ok := store.ParseRunChange(x1.String)
		if !ok {
			return nil, fmt.Errorf("event %d: run state change %q", e.ID, x1.String)
		}
		return (&store.RunChangeSource{EventID: e.ID, RunID: e.RunID, Workflow: e.Workflow, Entity: e.Entity, Actor: e.Actor,
			From: from, To: to, At: e.At}).Event(), nil
	}
	return nil, fmt.Errorf("event %d: unknown kind %d", e.ID, kind)
}
