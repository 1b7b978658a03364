package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/store"
)

// StepRecord implements store.Store. The batch is one transaction of a fixed number of
// round trips, whatever its size:
//
//  1. the compare-and-set of every entry's step, one UPDATE … FROM unnest; the close of
//     every entry's own attempt row; the steps as they now stand with their runs, locked
//     in ID order (the order RunReplay follows: steps, then runs); the steps of those runs
//     (what decides the runs' states and the steps' dependents);
//  2. after PlanRecord, in Go, the ledger rows the entries hold, locked in key order, then
//     completed or released (only when an entry changes the ledger), sent with the next
//     round trip (the claim of a WriteBatch, or the events and COMMIT) unless an entry
//     that lost its lease completes one, whose events depend on it;
//  3. the release, cancel or skip of dependents and the run states, decided in Go entry by
//     entry (see runSet), and the audit events, just before COMMIT.
func (s *Store) StepRecord(ctx context.Context, ps []store.StepRecordParams) ([]error, error) {
	invalid := make([]error, len(ps))
	valid := 0
	for i := range ps {
		if err := ps[i].Validate(); err != nil {
			invalid[i] = fmt.Errorf("postgres: step %d: %w", ps[i].StepID, err)
			continue
		}
		valid++
	}
	results := make([]error, len(ps))
	if valid == 0 {
		copy(results, invalid)
		return results, nil
	}
	err := s.keyedTx(ctx, "step record", func(t *txn) error {
		copy(results, invalid)
		return record(ctx, t, ps, results)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// recordEntry is one valid entry of a StepRecord call.
type recordEntry struct {
	i       int // index in the call
	p       *store.StepRecordParams
	errText string
	// cas is set for the entry that tries the compare-and-set on its step: the first of
	// the call for that step. Later entries for the same step find it no longer
	// processing under their attempt, as they would one call later.
	cas     bool
	applied bool
	// cancelled is set for an entry whose step was cancelled, with its run, while the
	// attempt ran (store.PlanCancelledRecord).
	cancelled bool
	st        *store.Step
	run       *store.Run
	// claim is the claim of the attempt in flight, and key what the step held of the
	// ledger: as the compare-and-set found them, for an entry that applied; as the step
	// stands, for one that did not.
	claim claimFacts
	key   keyFacts
	// plan is what PlanRecord decided, for an entry that applied.
	plan   store.RecordPlan
	events []*store.Event
}

func record(ctx context.Context, t *txn, ps []store.StepRecordParams, results []error) error {
	var entries []*recordEntry
	first := map[int64]bool{}
	for i := range ps {
		if results[i] != nil {
			continue
		}
		e := &recordEntry{i: i, p: &ps[i], errText: clean(ps[i].Error), cas: !first[ps[i].StepID]}
		first[ps[i].StepID] = true
		entries = append(entries, e)
	}
	var rs runSet
	if err := recordSteps(ctx, t, entries, &rs); err != nil {
		return err
	}

	var fx effectWrites
	notify := false
	for _, e := range entries {
		p := e.p
		switch {
		case e.st == nil:
			results[e.i] = fmt.Errorf("postgres: step %d: %w", p.StepID, store.ErrNotFound)
		case e.applied:
			plan := store.PlanRecord(p, e.run, e.st, e.errText)
			e.plan = plan
			ev := plan.Event
			if ev == nil && !e.claim.inFlight() {
				ev = store.RecordEvent(p, e.run, e.st, e.errText) // an attempt claimed before migration 0013 stores it
			}
			e.events = append(e.events, ev) // nil: derived from the attempt row
			// The compare-and-set completed or released the key the step row held; a step
			// written before migration 0014 has its ledger row in effects.
			if e.key.legacy() {
				switch plan.Effect {
				case store.EffectComplete:
					fx.complete(e, p.RecordOutput())
				case store.EffectRelease:
					fx.release(e.st)
				}
			}
			// A completion notifies when it released a dependent (counted below).
			notify = notify || (plan.Due && plan.Dependents != store.DependentsRelease)
		default:
			if effect, ev, ok := store.PlanCancelledRecord(p, e.run, e.st, e.errText); ok {
				e.cancelled = true
				results[e.i] = store.CancelledError(p)
				e.events = append(e.events, ev)
				// The step stays cancelled; it keeps what its attempt ended with, and its
				// lease ends.
				t.queue(`UPDATE steps SET lease_owner = '', lease_expires_at = NULL, last_outcome = $1, last_error = $2, reason = $7, updated_at = $3,`+claimCleared+`
					WHERE id = $4 AND state = 'cancelled' AND lease_owner = $5 AND attempt = $6`,
					string(p.Outcome), e.errText, p.Now, p.StepID, p.Owner, p.Attempt, store.CancelledRecordReason(p))
				switch effect {
				case store.EffectComplete:
					fx.keep(e, p.SuccessOutput())
				case store.EffectRelease:
					fx.free(e)
				}
				continue
			}
			results[e.i] = store.LeaseLostError(p)
			e.events = append(e.events, store.LostRecordEvent(p, e.run, e.st))
			if p.Outcome == store.OutcomeSuccess {
				// The effect happened: keep its result in the ledger if the step still holds
				// the key, so that it is not repeated.
				fx.keep(e, p.SuccessOutput())
			}
		}
	}

	switch {
	case len(fx.keys) == 0:
	case fx.lostKept():
		// Which completions applied decides events: read them now.
		b := &pgx.Batch{}
		fx.queue(b)
		br := t.SendBatch(ctx, b)
		if err := errors.Join(readRecordWrites(br, &fx), br.Close()); err != nil {
			return err
		}
	default:
		// Nothing reads their results: they go with the transaction's next round trip.
		if t.queued == nil {
			t.queued = &pgx.Batch{}
		}
		fx.queue(t.queued)
	}
	// Entry by entry, as one entry per call would: its events, its attempt row, its change
	// and the propagation to the steps that need its step, then its run's state. A
	// completion's step.completed, and the run.state_changed right after it, are derived
	// from the attempt row.
	for _, e := range entries {
		p := e.p
		var end *txEvent
		derived := e.applied && e.claim.inFlight() && store.DerivableRecord(p)
		for k, ev := range e.events {
			switch {
			case k > 0:
				t.event(ev)
			case derived:
				end = t.derive(p.Now)
			default:
				end = t.store(ev)
			}
		}
		if fx.kept[e] && !e.applied && !e.cancelled {
			t.event(store.LostResultKeptEvent(p, e.run, e.st))
		}
		var a *attemptRow
		switch {
		case (e.applied || e.cancelled) && e.claim.inFlight():
			a = t.endAttempt(end, e.st.RunID, e.st.ID, e.st.Name, e.st.EffectKey, p.Owner, p.Attempt, e.claim, p.Now, p.Outcome, e.errText, p)
			if derived {
				a.endDerived, a.endReason = true, string(clean(p.Reason))
				if actor := p.RecordActor(); actor != p.Owner {
					a.endActor = clean(actor)
				}
			}
		case !e.applied && !e.cancelled:
			// Its attempt ended already (a reaper closed it, or this is its second record):
			// the row keeps what really happened, unless it derives its completion.
			if b := t.bufferedAttempt(p.StepID, p.Attempt, p.Owner); b != nil && !b.endDerived {
				b.ended, b.outcome, b.err, b.status, b.excerpt = p.Now, string(p.Outcome), e.errText, p.ResponseStatus, clean(p.ResponseExcerpt)
			}
		}
		if !e.applied {
			continue
		}
		rs.set(e.run.ID, e.st.ID, p.NextState)
		switch e.plan.Dependents {
		case store.DependentsRelease:
			notify = rs.release(e.run.ID, e.st.Name, p.Now) > 0 || notify
		case store.DependentsCancel:
			rs.cancelDependents(t, e.run.ID, p.Now)
		case store.DependentsSkip:
			rs.skipDependents(t, e.run.ID, p.Now)
		}
		if derived && t.last() == end {
			if r, next, changed := rs.change(e.run.ID); changed {
				a.endRun = t.derive(p.Now)
				a.endRunChange = store.RunChange(r.run.State, next)
				rs.apply(r, next, p.Now)
			}
			continue
		}
		rs.refresh(t, e.run.ID, p.Now, p.RecordActor())
	}
	t.notify = t.notify || notify
	rs.queueWrites(t)
	return nil
}

// recordSteps applies the compare-and-set of the entries' steps, closes their attempts,
// reads their steps as they now stand and their runs, locked, and reads the steps of those
// runs into rs as they were before the compare-and-set, in one round trip.
func recordSteps(ctx context.Context, t *txn, entries []*recordEntry, rs *runSet) error {
	var cas []*recordEntry
	for _, e := range entries {
		if e.cas {
			cas = append(cas, e)
		}
	}
	// Steps are updated in ID order, runs locked in ID order.
	slices.SortFunc(cas, func(a, b *recordEntry) int { return cmp.Compare(a.p.StepID, b.p.StepID) })
	n := len(cas)
	ids, nows, nextAts := make([]int64, n), make([]time.Time, n), make([]time.Time, n)
	owners, states, outcomes, errs, reasons := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	attempts := make([]int32, n)
	outputs := make([][]byte, n)
	effects, retains := make([]int32, n), make([]*time.Time, n)
	for j, e := range cas {
		p := e.p
		ids[j], owners[j], attempts[j], states[j], nextAts[j] = p.StepID, p.Owner, int32(p.Attempt), string(p.NextState), p.RecordNextAt()
		outcomes[j], outputs[j], errs[j], reasons[j], nows[j] = string(p.Outcome), p.RecordOutput(), e.errText, string(clean(p.Reason)), p.Now
		effects[j], retains[j] = int32(p.LedgerChange()), nullTime(p.RetainUntil)
	}

	// Only the caller's own attempt row is closed: a record from another owner must not
	// close the attempt the lease holder is still running. For an attempt recorded twice in
	// the call, the later entry's result is kept, as it would be one call later.
	type attemptKey struct {
		step   int64
		number int
		worker string
	}
	latest := map[attemptKey]*recordEntry{}
	var order []attemptKey
	for _, e := range entries {
		k := attemptKey{e.p.StepID, e.p.Attempt, e.p.Owner}
		if latest[k] == nil {
			order = append(order, k)
		}
		latest[k] = e
	}
	m := len(order)
	aStep, aEnded := make([]int64, m), make([]time.Time, m)
	aNumber, aStatus := make([]int32, m), make([]int32, m)
	aWorker, aOutcome, aError, aExcerpt := make([]string, m), make([]string, m), make([]string, m), make([]string, m)
	for j, k := range order {
		e := latest[k]
		aStep[j], aNumber[j], aWorker[j], aEnded[j] = k.step, int32(k.number), k.worker, e.p.Now
		aOutcome[j], aError[j], aStatus[j], aExcerpt[j] = string(e.p.Outcome), e.errText, int32(e.p.ResponseStatus), clean(e.p.ResponseExcerpt)
	}

	all := make([]int64, 0, len(entries))
	for _, e := range entries {
		all = append(all, e.p.StepID)
	}
	b := &pgx.Batch{}
	// The compare-and-set ends the claim of the attempt in flight, completes or releases the
	// key the step row holds in flight (effect: 1 complete, 2 release), and returns the
	// claim and the ledger facts as they were (o: the row before the update). The state it
	// expects is a parameter, so that the plan PostgreSQL keeps finds the steps by ID rather
	// than reading the partial index of the steps in flight whole (which a literal
	// 'processing' lets it choose).
	b.Queue(`UPDATE steps s SET state = u.state, next_at = u.next_at, lease_owner = '', lease_expires_at = NULL, last_outcome = u.outcome,
			output = coalesce(u.output, s.output), last_error = u.error, reason = u.reason, updated_at = u.now,`+claimCleared+`,
			key_state = CASE WHEN s.key_slot = 0 AND s.key_state = 'in_flight' AND u.effect = 1 THEN 'completed'
				WHEN s.key_slot = 0 AND s.key_state = 'in_flight' AND u.effect = 2 THEN '' ELSE s.key_state END,
			key_completed_at = CASE WHEN s.key_slot = 0 AND s.key_state = 'in_flight' AND u.effect = 1 THEN u.now ELSE s.key_completed_at END,
			key_retain_until = CASE WHEN s.key_slot = 0 AND s.key_state = 'in_flight' AND u.effect = 1 THEN u.retain_until
				WHEN s.key_slot = 0 AND s.key_state = 'in_flight' AND u.effect = 2 THEN NULL ELSE s.key_retain_until END,
			key_slot = CASE WHEN s.key_slot = 0 AND s.key_state = 'in_flight' AND u.effect = 2 THEN s.id ELSE s.key_slot END
		FROM unnest($1::bigint[], $2::text[], $3::int4[], $4::text[], $5::timestamptz[], $6::text[], $7::bytea[], $8::text[], $9::text[], $10::timestamptz[],
				$11::int4[], $12::timestamptz[])
			WITH ORDINALITY AS u(id, owner, attempt, state, next_at, outcome, output, error, reason, now, effect, retain_until, ord), steps o
		WHERE s.id = u.id AND o.id = u.id AND s.lease_owner = u.owner AND s.attempt = u.attempt AND s.state = $13
		RETURNING u.ord, `+strings.ReplaceAll(claimColumns, "s.", "o.")+`, `+strings.ReplaceAll(ledgerColumns, "s.", "o.")+``,
		ids, owners, attempts, states, nextAts, outcomes, outputs, errs, reasons, nows, effects, retains, string(store.StateProcessing))
	// An attempt claimed before migration 0013, or closed by the reaper, has its row: it is
	// closed with what happened, unless it derives its completion.
	b.Queue(`UPDATE attempts a SET ended_at = u.ended_at, outcome = u.outcome, error = u.error, response_status = u.status, response_excerpt = u.excerpt
		FROM unnest($1::bigint[], $2::int4[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::int4[], $8::text[])
			AS u(step_id, number, worker, ended_at, outcome, error, status, excerpt)
		WHERE a.step_id = u.step_id AND a.number = u.number AND a.worker = u.worker AND NOT a.end_derived`,
		aStep, aNumber, aWorker, aEnded, aOutcome, aError, aStatus, aExcerpt)
	// The steps as they now stand, with their runs, locked in ID order.
	b.Queue(`SELECT `+stepColumns+`, `+runColumns+`, `+claimColumns+`, `+ledgerColumns+` FROM steps s JOIN runs r ON r.id = s.run_id WHERE s.id = ANY($1)
		ORDER BY r.id FOR NO KEY UPDATE OF r`, all)
	// The steps of those runs, read once the runs are locked (a statement of its own, so
	// that it sees what the transactions that held them committed). The run IDs are an
	// array, so that the planner looks them up in the (run_id, name) index: as a semi-join
	// it may hash the whole steps table, which costs more as the table grows.
	b.Queue(`SELECT `+stepStatusColumns+`, NULL::bytea
		FROM steps WHERE run_id = ANY(ARRAY(SELECT run_id FROM steps WHERE id = ANY($1)))`, all)
	br := t.SendBatch(ctx, b)
	err := func() error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var ord int64
		var old claimScan
		var oldKey keyScan
		if _, err := pgx.ForEachRow(rows, append(append([]any{&ord}, old.dest()...), oldKey.dest()...), func() error {
			cas[ord-1].applied, cas[ord-1].claim, cas[ord-1].key = true, old.facts(), oldKey.facts()
			return nil
		}); err != nil {
			return err
		}
		if _, err := br.Exec(); err != nil {
			return err
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		type stepRun struct {
			st    *store.Step
			run   *store.Run
			claim claimFacts
			key   keyFacts
		}
		steps := map[int64]stepRun{}
		runs := map[int64]*store.Run{}
		if _, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
			var cs claimScan
			var ks keyScan
			st, run, err := scanStepRun(row, append(cs.dest(), ks.dest()...)...)
			if err == nil {
				if runs[run.ID] == nil {
					runs[run.ID] = run
				}
				steps[st.ID] = stepRun{st, runs[run.ID], cs.facts(), ks.facts()}
			}
			return struct{}{}, err
		}); err != nil {
			return err
		}
		for _, e := range entries {
			if sr, ok := steps[e.p.StepID]; ok {
				e.st, e.run = sr.st, sr.run
				if !e.applied {
					e.claim, e.key = sr.claim, sr.key
				}
				rs.add(sr.run)
			}
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		if err := rs.load(rows); err != nil {
			return err
		}
		// The copy starts from the steps as they were before this call: a step whose
		// compare-and-set applied was processing.
		for _, e := range cas {
			if e.applied && e.run != nil {
				rs.set(e.run.ID, e.st.ID, store.StateProcessing)
			}
		}
		return nil
	}()
	return errors.Join(err, br.Close())
}

// effectWrites are the ledger changes of a StepRecord call: rows completed (by the step
// that holds them, or kept after a lost lease) and rows released.
type effectWrites struct {
	completing []*recordEntry
	outputs    [][]byte
	releaseKey []string
	releaseID  []int64
	keys       map[string]bool
	// keeping and freeing are the entries whose step row holds the key: a success kept
	// while the step is not completed (a lost lease, a cancelled step), a refusal freeing it.
	keeping     []*recordEntry
	keepOutputs [][]byte
	freeing     []int64
	// kept holds the entries whose completion applied.
	kept map[*recordEntry]bool
}

// keep completes, with output as its result, the key e's step still holds in flight: in
// its row, or for a step written before migration 0014 in effects.
func (fx *effectWrites) keep(e *recordEntry, output []byte) {
	if e.key.legacy() {
		fx.complete(e, output)
		return
	}
	if e.st.EffectKey == "" || fx.keys[e.st.EffectKey] {
		return
	}
	fx.note(e.st.EffectKey)
	fx.keeping, fx.keepOutputs = append(fx.keeping, e), append(fx.keepOutputs, output)
}

// free releases the key e's step holds in flight.
func (fx *effectWrites) free(e *recordEntry) {
	if e.key.legacy() {
		fx.release(e.st)
		return
	}
	if e.st.EffectKey == "" || fx.keys[e.st.EffectKey] {
		return
	}
	fx.note(e.st.EffectKey)
	fx.freeing = append(fx.freeing, e.st.ID)
}

// complete completes the row e's step holds with output, unless an earlier entry of the
// call already completes that key.
func (fx *effectWrites) complete(e *recordEntry, output []byte) {
	if e.st.EffectKey == "" || fx.keys[e.st.EffectKey] {
		return
	}
	fx.note(e.st.EffectKey)
	fx.completing, fx.outputs = append(fx.completing, e), append(fx.outputs, output)
}

// release deletes the row st holds in flight.
func (fx *effectWrites) release(st *store.Step) {
	if st.EffectKey == "" || fx.keys[st.EffectKey] {
		return
	}
	fx.note(st.EffectKey)
	fx.releaseKey, fx.releaseID = append(fx.releaseKey, st.EffectKey), append(fx.releaseID, st.ID)
}

// lostKept reports whether a completion is that of an entry that lost its lease, whose
// events depend on whether it applied.
func (fx *effectWrites) lostKept() bool {
	for _, e := range slices.Concat(fx.completing, fx.keeping) {
		if !e.applied && !e.cancelled {
			return true
		}
	}
	return false
}

func (fx *effectWrites) note(key string) {
	if fx.keys == nil {
		fx.keys = map[string]bool{}
	}
	fx.keys[key] = true
}

// queue adds the ledger changes to b: the rows are locked in key order first, so that
// transactions changing several rows never wait for each other in a cycle.
func (fx *effectWrites) queue(b *pgx.Batch) {
	if len(fx.keys) == 0 {
		return
	}
	if n := len(fx.keeping); n > 0 {
		ids, nows, retains := make([]int64, n), make([]time.Time, n), make([]*time.Time, n)
		for j, e := range fx.keeping {
			ids[j], nows[j], retains[j] = e.st.ID, e.p.Now, nullTime(e.p.RetainUntil)
		}
		b.Queue(`UPDATE steps s SET key_state = 'completed', key_result = u.result, key_completed_at = u.now, key_retain_until = u.retain_until
			FROM unnest($1::bigint[], $2::bytea[], $3::timestamptz[], $4::timestamptz[]) WITH ORDINALITY AS u(id, result, now, retain_until, ord)
			WHERE s.id = u.id AND s.key_slot = 0 AND s.key_state = 'in_flight'
			RETURNING u.ord`, ids, fx.keepOutputs, nows, retains)
	}
	if len(fx.freeing) > 0 {
		b.Queue(`UPDATE steps SET key_slot = id, key_state = '', key_retain_until = NULL WHERE id = ANY($1) AND key_slot = 0 AND key_state = 'in_flight'`, fx.freeing)
	}
	if len(fx.completing) == 0 && len(fx.releaseKey) == 0 {
		return
	}
	keys := make([]string, 0, len(fx.keys))
	for _, e := range fx.completing {
		keys = append(keys, e.st.EffectKey)
	}
	keys = append(keys, fx.releaseKey...)
	slices.Sort(keys)
	b.Queue(`SELECT 1 FROM effects WHERE effect_key = ANY($1) ORDER BY effect_key FOR UPDATE`, keys)
	if n := len(fx.completing); n > 0 {
		cKey, cRetain := make([]string, n), make([]*time.Time, n)
		cID := make([]int64, n)
		cNow := make([]time.Time, n)
		for j, e := range fx.completing {
			cKey[j], cID[j], cNow[j], cRetain[j] = e.st.EffectKey, e.st.ID, e.p.Now, nullTime(e.p.RetainUntil)
		}
		b.Queue(`UPDATE effects e SET state = 'completed', result = u.result, completed_at = u.now, retain_until = u.retain_until
			FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::timestamptz[], $5::timestamptz[]) WITH ORDINALITY
				AS u(effect_key, step_id, result, now, retain_until, ord)
			WHERE e.effect_key = u.effect_key AND e.step_id = u.step_id AND e.state = 'in_flight'
			RETURNING u.ord`, cKey, cID, fx.outputs, cNow, cRetain)
	}
	if len(fx.releaseKey) > 0 {
		b.Queue(`DELETE FROM effects e USING unnest($1::text[], $2::bigint[]) AS u(effect_key, step_id)
			WHERE e.effect_key = u.effect_key AND e.step_id = u.step_id AND e.state = 'in_flight'`, fx.releaseKey, fx.releaseID)
	}
}

// readRecordWrites reads the results of the ledger changes record sent: which completions
// applied.
func readRecordWrites(br pgx.BatchResults, fx *effectWrites) error {
	fx.kept = map[*recordEntry]bool{}
	if len(fx.keeping) > 0 {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var ord int64
		if _, err := pgx.ForEachRow(rows, []any{&ord}, func() error {
			fx.kept[fx.keeping[ord-1]] = true
			return nil
		}); err != nil {
			return err
		}
	}
	if len(fx.freeing) > 0 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	if len(fx.completing) == 0 && len(fx.releaseKey) == 0 {
		return nil
	}
	if _, err := br.Exec(); err != nil {
		return err
	}
	if len(fx.completing) > 0 {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var ord int64
		if _, err := pgx.ForEachRow(rows, []any{&ord}, func() error {
			fx.kept[fx.completing[ord-1]] = true
			return nil
		}); err != nil {
			return err
		}
	}
	if len(fx.releaseKey) > 0 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}
