package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

// The audit trail is the events stored in events merged, by ID, with the events derived
// from the rows that hold their facts (store/derive.go, migration 0013): a run's creation
// (runs), the claim of an attempt in flight and the run state change it made (steps), the
// claim and the end of an attempt that ended and the run state changes that followed them
// (attempts). EventList reads them all with one statement, one arm per source, each in
// the order of its ID column (descending, newest first) with the filters applied within
// it and the limit, so that PostgreSQL merges the arms in ID order (Merge Append) having
// read at most the limit from each, and one snapshot shows an event that moved from a step
// row to an attempt row exactly once. Every arm's columns have the types of the stored
// events' (0::bigint, NULL::timestamptz): a union whose arms differ in a column's type is
// not merged but sorted whole.

// Kinds of the rows of eventsSQL.
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

// armTypes are the types of event each derived arm yields.
var armTypes = map[int]store.EventType{
	armRunCreated: store.EventRunCreated, armClaimEnded: store.EventStepClaimed, armClaimInFlight: store.EventStepClaimed,
	armEnd: store.EventStepCompleted, armClaimRunEnded: store.EventRunStateChanged, armClaimRunInFlight: store.EventRunStateChanged,
	armEndRun: store.EventRunStateChanged,
}

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
	// sel selects the 17 columns of a row: id, kind, type (stored events), at, run_id,
	// step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail and
	// three of the derivation (x1 text, x2 bigint, x3 text); x4 is a time of the
	// derivation. from names the tables and where the source's condition.
	sel, from, where string
	// id and at are the event's ID and time columns; run its run's and step the step
	// row's ID (attempts: step_id); key is set for the arms of events that name an effect
	// key.
	id, at, run, step, key string
	// viaSteps is set for the arms on attempts: a run's or a key's rows are found through
	// their steps.
	viaSteps bool
	// actor is the column of the event's actor, or a quoted constant when every event of
	// the arm has the same actor; workflow the column of its workflow.
	actor, workflow string
}

// endActor is the actor of the events derived from an attempt's end: the record's actor,
// or the worker.
const endActor = `CASE WHEN a.end_actor <> '' THEN a.end_actor ELSE a.worker END`

var eventArms = []eventArm{
	{kind: armStored, sel: `e.id, 0, e.type, e.at, e.run_id, e.step_id, e.workflow, e.entity, e.step_name, e.effect_key, e.attempt, e.actor, e.reason,
		e.detail::text, NULL::text, NULL::bigint, NULL::text, NULL::timestamptz`,
		from: `events e`, where: `true`, id: `e.id`, at: `e.at`, run: `e.run_id`, key: `e.effect_key`, actor: `e.actor`, workflow: `e.workflow`},
	{kind: armRunCreated, sel: `r.created_event_id, 1, '', r.created_at, r.id, 0::bigint, r.workflow, ` + entityAt(`r.created_event_id`) + `, '', '', 0,
		r.created_by, '', NULL, r.run_key, r.created_steps::bigint, NULL, NULL::timestamptz`,
		from: `runs r`, where: `r.created_event_id IS NOT NULL`, id: `r.created_event_id`, at: `r.created_at`, run: `r.id`, actor: `r.created_by`, workflow: `r.workflow`},
	{kind: armClaimEnded, sel: `a.claim_event_id, 2, '', a.started_at, a.run_id, a.step_id, r.workflow, ` + entityAt(`a.claim_event_id`) + `,
		a.step_name, a.effect_key, a.number, 'engine', '', NULL, a.worker, NULL::bigint, a.prev_outcome, a.lease_until`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.claim_event_id IS NOT NULL`, id: `a.claim_event_id`, at: `a.started_at`,
		step: `a.step_id`, key: `a.effect_key`, viaSteps: true, actor: `'engine'`, workflow: `r.workflow`},
	{kind: armClaimInFlight, sel: `s.claim_event_id, 3, '', s.claimed_at, s.run_id, s.id, r.workflow, ` + entityAt(`s.claim_event_id`) + `,
		s.name, s.effect_key, s.attempt, 'engine', '', NULL, s.lease_owner, NULL::bigint, s.claim_prev_outcome, s.claim_lease_until`,
		from: `steps s JOIN runs r ON r.id = s.run_id`, where: `s.claim_event_id > 0`, id: `s.claim_event_id`, at: `s.claimed_at`, run: `s.run_id`,
		key: `s.effect_key`, actor: `'engine'`, workflow: `r.workflow`},
	{kind: armEnd, sel: `a.id, 4, '', a.ended_at, a.run_id, a.step_id, r.workflow, ` + entityAt(`a.id`) + `, a.step_name, a.effect_key, a.number,
		CASE WHEN a.end_actor <> '' THEN a.end_actor ELSE a.worker END, a.end_reason, NULL, a.outcome, a.response_status::bigint, a.error, NULL::timestamptz`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.end_derived`, id: `a.id`, at: `a.ended_at`,
		step: `a.step_id`, key: `a.effect_key`, viaSteps: true, actor: endActor, workflow: `r.workflow`},
	{kind: armClaimRunEnded, sel: `a.claim_run_event_id, 5, '', a.started_at, a.run_id, 0::bigint, r.workflow, ` + entityAt(`a.claim_run_event_id`) + `, '', '', 0,
		'engine', '', NULL, a.claim_run_change, NULL::bigint, NULL, NULL::timestamptz`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.claim_run_event_id IS NOT NULL`, id: `a.claim_run_event_id`, at: `a.started_at`,
		step: `a.step_id`, viaSteps: true, actor: `'engine'`, workflow: `r.workflow`},
	{kind: armClaimRunInFlight, sel: `s.claim_run_event_id, 6, '', s.claimed_at, s.run_id, 0::bigint, r.workflow, ` + entityAt(`s.claim_run_event_id`) + `, '', '', 0,
		'engine', '', NULL, s.claim_run_change, NULL::bigint, NULL, NULL::timestamptz`,
		from: `steps s JOIN runs r ON r.id = s.run_id`, where: `s.claim_event_id > 0 AND s.claim_run_event_id IS NOT NULL`, id: `s.claim_run_event_id`,
		at: `s.claimed_at`, run: `s.run_id`, actor: `'engine'`, workflow: `r.workflow`},
	{kind: armEndRun, sel: `a.end_run_event_id, 7, '', a.ended_at, a.run_id, 0::bigint, r.workflow, ` + entityAt(`a.end_run_event_id`) + `, '', '', 0,
		CASE WHEN a.end_actor <> '' THEN a.end_actor ELSE a.worker END, '', NULL, a.end_run_change, NULL::bigint, NULL, NULL::timestamptz`,
		from: `attempts a JOIN runs r ON r.id = a.run_id`, where: `a.end_run_event_id IS NOT NULL`, id: `a.end_run_event_id`, at: `a.ended_at`,
		step: `a.step_id`, viaSteps: true, actor: endActor, workflow: `r.workflow`},
}

// eventsSQL is the statement of EventList, restricted to events of types (nil: any) and
// IDs up to through, and its arguments.
func eventsSQL(p store.EventListParams, types []store.EventType, through int64) (string, []any) {
	var args []any
	// arg adds v and returns its placeholder.
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var run, entity, key, since, until, after, before, actor, workflow, typeList string
	if p.RunID > 0 {
		run = arg(p.RunID)
	}
	if p.Entity != "" {
		entity = arg(p.Entity)
	}
	if p.EffectKey != "" {
		key = arg(p.EffectKey)
	}
	if !p.Since.IsZero() {
		since = arg(p.Since)
	}
	if !p.Until.IsZero() {
		until = arg(p.Until)
	}
	if p.AfterID > 0 {
		after = arg(p.AfterID)
	}
	if p.BeforeID > 0 {
		before = arg(p.BeforeID)
	}
	if p.Actor != "" {
		actor = arg(p.Actor)
	}
	if p.Workflow != "" {
		workflow = arg(p.Workflow)
	}
	types = p.KeptTypes(types)
	upTo := arg(through)
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	lim := arg(limit)
	dir := ""
	if p.Newest {
		dir = " DESC"
	}
	if types != nil {
		names := make([]string, len(types))
		for i, t := range types {
			names[i] = string(t)
		}
		typeList = arg(names)
	}
	var arms []string
	for _, a := range eventArms {
		if key != "" && a.key == "" {
			continue // its events name no key
		}
		if actor != "" && strings.HasPrefix(a.actor, "'") && a.actor != "'"+p.Actor+"'" {
			continue // its events' actor is another
		}
		if types != nil && a.kind != armStored && !slices.Contains(types, armTypes[a.kind]) {
			continue
		}
		conds := []string{a.where, a.id + ` <= ` + upTo}
		if run != "" {
			if a.viaSteps {
				conds = append(conds, a.step+` IN (SELECT id FROM steps WHERE run_id = `+run+`)`)
			} else {
				conds = append(conds, a.run+` = `+run)
			}
		}
		if entity != "" {
			if a.kind == armStored {
				conds = append(conds, `e.entity = `+entity+` AND e.entity <> ''`)
			} else {
				// The runs that had the entity, then the entity at the event's time.
				runs := `SELECT id FROM runs WHERE entity = ` + entity + ` UNION SELECT run_id FROM run_revisions WHERE entity_before = ` + entity +
					` UNION SELECT run_id FROM run_revisions WHERE entity_after = ` + entity
				if a.viaSteps {
					conds = append(conds, a.step+` IN (SELECT id FROM steps WHERE run_id IN (`+runs+`))`)
				} else {
					conds = append(conds, a.run+` IN (`+runs+`)`)
				}
				conds = append(conds, entityAt(a.id)+` = `+entity)
			}
		}
		if key != "" {
			conds = append(conds, a.key+` = `+key+` AND `+a.key+` <> ''`)
			if a.viaSteps {
				conds = append(conds, a.step+` IN (SELECT id FROM steps WHERE effect_key = `+key+` AND effect_key <> ''
					UNION SELECT step_id FROM step_keys_used WHERE effect_key = `+key+`)`)
			}
		}
		if since != "" {
			conds = append(conds, a.id+` >= (SELECT coalesce(min(first_id), 9223372036854775807) FROM audit_spans WHERE max_at >= `+since+`)`,
				a.at+` >= `+since)
		}
		if until != "" {
			conds = append(conds, a.id+` <= (SELECT coalesce(max(last_id), 0) FROM audit_spans WHERE min_at < `+until+`)`, a.at+` < `+until)
		}
		if after != "" {
			conds = append(conds, a.id+` > `+after)
		}
		if before != "" {
			conds = append(conds, a.id+` < `+before)
		}
		if actor != "" && !strings.HasPrefix(a.actor, "'") {
			conds = append(conds, a.actor+` = `+actor)
		}
		if workflow != "" {
			conds = append(conds, a.workflow+` = `+workflow)
		}
		if typeList != "" && a.kind == armStored {
			conds = append(conds, `e.type = ANY(`+typeList+`)`)
		}
		arms = append(arms, `(SELECT `+a.sel+` FROM `+a.from+` WHERE `+strings.Join(conds, " AND ")+` ORDER BY `+a.id+dir+` LIMIT `+lim+`)`)
	}
	return "SELECT * FROM (" + strings.Join(arms, "\nUNION ALL\n") + ") AS trail\nORDER BY 1" + dir + " LIMIT " + lim, args
}

// EventList implements store.Store: the stored and derived events, merged by ID, with one
// statement (one snapshot). It lists only events below the horizon of transactions in
// progress (see eventHorizon), so that, as the contract says, IDs appear in commit order:
// a reader paging with AfterID never skips an event committed later with a smaller ID.
func (s *Store) EventList(ctx context.Context, p store.EventListParams) ([]*store.Event, error) {
	var out []*store.Event
	err := s.read(ctx, "event list", func(q querier) error {
		horizon, err := s.eventHorizon(ctx)
		if err != nil {
			return err
		}
		out, err = listEvents(ctx, q, p, nil, horizon)
		return err
	})
	return out, err
}

// listEvents runs eventsSQL.
func listEvents(ctx context.Context, q querier, p store.EventListParams, types []store.EventType, through int64) ([]*store.Event, error) {
	sql, args := eventsSQL(p, types, through)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Event, error) { return scanListedEvent(row) })
}

// scanListedEvent scans a row of eventsSQL and builds its event.
func scanListedEvent(row pgx.Row) (*store.Event, error) {
	var e store.Event
	var kind int
	var d, x1, x3 *string
	var x2 *int64
	var x4 pgtype.Timestamptz
	if err := row.Scan(&e.ID, &kind, &e.Type, &e.At, &e.RunID, &e.StepID, &e.Workflow, &e.Entity, &e.StepName, &e.EffectKey, &e.Attempt, &e.Actor,
		&e.Reason, &d, &x1, &x2, &x3, &x4); err != nil {
		return nil, err
	}
	e.At = e.At.UTC()
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	num := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	var derived *store.Event
	switch kind {
	case armStored:
		e.Detail = json.RawMessage(str(d))
		return &e, nil
	case armRunCreated:
		derived = (&store.RunCreatedSource{EventID: e.ID, RunID: e.RunID, Workflow: e.Workflow, RunKey: str(x1), Entity: e.Entity, Actor: e.Actor,
			Steps: int(num(x2)), At: e.At}).Event()
	case armClaimEnded, armClaimInFlight:
		derived = (&store.ClaimSource{EventID: e.ID, RunID: e.RunID, StepID: e.StepID, Workflow: e.Workflow, Entity: e.Entity, Step: e.StepName,
			Key: e.EffectKey, Worker: str(x1), Attempt: e.Attempt, At: e.At, LeaseUntil: fromTS(x4), PrevOutcome: store.Outcome(str(x3))}).Event()
	case armEnd:
		derived = (&store.EndSource{EventID: e.ID, RunID: e.RunID, StepID: e.StepID, Workflow: e.Workflow, Entity: e.Entity, Step: e.StepName,
			Key: e.EffectKey, Actor: e.Actor, Reason: e.Reason, Error: str(x3), Attempt: e.Attempt, ResponseStatus: int(num(x2)),
			Outcome: store.Outcome(str(x1)), At: e.At}).Event()
	case armClaimRunEnded, armClaimRunInFlight, armEndRun:
		from, to, ok := store.ParseRunChange(str(x1))
		if !ok {
			return nil, fmt.Errorf("event %d: run state change %q", e.ID, str(x1))
		}
		derived = (&store.RunChangeSource{EventID: e.ID, RunID: e.RunID, Workflow: e.Workflow, Entity: e.Entity, Actor: e.Actor,
			From: from, To: to, At: e.At}).Event()
	default:
		return nil, fmt.Errorf("event %d: unknown kind %d", e.ID, kind)
	}
	// As PostgreSQL returns a stored event's detail: jsonb's text.
	derived.Detail = jsonbText(derived.Detail)
	return derived, nil
}
