package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/store"
)

// Batching changes how many transactions there are, never what happens to an item, which
// events it appends or in which order: a call with many items (starts, claim candidates,
// records, reaped steps) leaves the audit trail, step rows and ledger that the same items
// one per call leave. In particular a run's state is re-derived after each item, so a
// run whose state changes twice inside one call appends both changes, each right after the
// events of the item that caused it.
//
// Each case drives the same scenario through two fresh stores, one item per call in the
// first and every item of a round in one call in the second, and compares what they hold.
// IDs may differ between the stores, so runs are named by run key and steps by name.

// trailBatch is the batch size of the batched drive: larger than any round of the
// scenarios, so that each round is one call.
const trailBatch = 100

// testBatchTrail: runs whose steps are joined (c needs a and b, d needs c) cover each
// claim decision and each propagation: a false condition skips b and, transitively, c and
// d; a failure of b cancels c and d; a Prepare error parks a; steps sharing a key take it,
// wait for it, then reuse it or conflict with it; a step retries; a record arrives twice
// (the second finds its lease lost); a start is repeated. Runs with two parallel root steps
// are claimed in one call, so that their state changes twice inside it; others are left by
// their worker, reaped (one to retrying, one to needs_review), recorded late (a lost lease
// whose success is kept) and claimed again (the kept result is reused).
func testBatchTrail(h *harness) {
	h.compareTrails(func(d *trailDriver) {
		join := []store.StepInsert{step("a"), step("b"), step("c", "a", "b"), step("d", "c")}
		var ps []store.RunInsertParams
		for i := range 12 {
			in := map[string]string{}
			switch i % 4 {
			case 1:
				in["b"] = "skip"
			case 2:
				// The last step, so that a reuse releases nothing: with one item per call, a
				// step released by a claim would be claimed in the same round.
				in["d"], in["d.fp"] = "shared", "fp1"
				if i == 10 {
					in["d.fp"] = "fp2" // completed by r02 with another request: a key conflict
				}
			case 3:
				in["a"] = "bad"
			}
			ps = append(ps, trailParams(fmt.Sprintf("r%02d", i), base, in, join...))
		}
		ps = append(ps, trailParams("seed", base, map[string]string{"s": "k-seed", "s.fp": "fpA"}, step("s")))
		// Due from the third round, once k-seed is completed.
		later := at(5 * time.Second)
		ps = append(ps,
			trailParams("p-park", later, map[string]string{"b": "k-seed", "b.fp": "fpB"}, step("a"), step("b")),
			trailParams("p-done", later, map[string]string{"a": "skip", "b": "k-seed", "b.fp": "fpA"}, step("a"), step("b")),
			trailParams("hung-1", later, nil, step("a")),
			trailParams("hung-2", later, nil, step("a"), step("b"), step("c", "b")),
		)
		ps = append(ps, ps[0]) // a repeated start
		d.start(ps)

		now := base
		var hung []*store.ClaimedStep
		for range 20 {
			now = now.Add(2 * time.Second)
			hung = append(hung, d.round(now, func(c *store.ClaimedStep, p *store.StepRecordParams) []store.StepRecordParams {
				switch {
				case strings.HasPrefix(c.Run.RunKey, "hung-"):
					return nil // the worker hangs
				case c.Run.RunKey == "r04" && c.Step.Name == "b":
					p.Outcome, p.Error, p.NextState, p.Output = store.OutcomePermanent, "400 Bad Request", store.StateFailed, nil
				case c.Run.RunKey == "r08" && c.Step.Name == "a":
					return []store.StepRecordParams{*p, *p} // recorded twice: the second is a lost lease
				case c.Run.RunKey == "r00" && c.Step.Name == "b" && c.Step.Attempt == 1:
					p.Outcome, p.NextState, p.NextAt, p.Reason = store.OutcomeRetryable, store.StateRetrying, now.Add(time.Second), store.ReasonRetryableError
					p.Output = nil
				}
				return []store.StepRecordParams{*p}
			})...)
		}
		if len(hung) != 3 {
			d.h.t.Fatalf("%d steps of the hung runs claimed, want 3", len(hung))
		}

		// The leases expire: hung-2's a goes to review, the others retry at once.
		review := map[int64]bool{}
		for _, c := range hung {
			review[c.Step.ID] = c.Run.RunKey == "hung-2" && c.Step.Name == "a"
		}
		now = now.Add(2 * time.Minute)
		d.reap(now, func(st *store.Step) store.ReapDecision {
			if review[st.ID] {
				return store.ReapDecision{State: store.StateNeedsReview, Reason: store.ReasonOutcomeUnknown}
			}
			return store.ReapDecision{State: store.StateRetrying, NextAt: now, Reason: store.ReasonLeaseExpired, Detail: map[string]any{"policy": "again"}}
		})
		// The hung worker wakes up: its results arrive late.
		var late []store.StepRecordParams
		for _, c := range hung {
			p := trailSuccess(c, now)
			if c.Step.Name == "b" {
				p.Outcome, p.NextState, p.NextAt, p.Reason, p.Output = store.OutcomeRetryable, store.StateRetrying, now, store.ReasonRetryableError, nil
			}
			late = append(late, p)
		}
		d.record(late)
		for range 4 {
			now = now.Add(2 * time.Second)
			d.round(now, func(_ *store.ClaimedStep, p *store.StepRecordParams) []store.StepRecordParams {
				return []store.StepRecordParams{*p}
			})
		}
	}, func(h *harness, single, batched *trailState) {
		// The scenario covers what it claims to.
		for _, want := range []store.EventType{
			store.EventStepSkipped, store.EventStepCancelled, store.EventStepNeedsReview, store.EventEffectReused,
			store.EventEffectWaiting, store.EventEffectConflict, store.EventStepRetryPlanned, store.EventLeaseLost,
			store.EventLeaseLostRecorded, store.EventLeaseExpired, store.EventRunDeduplicated, store.EventStepFailed,
		} {
			if !slices.ContainsFunc(batched.events, func(l string) bool { return strings.Contains(l, " "+string(want)+" ") }) {
				h.t.Errorf("the scenario appended no %s event", want)
			}
		}
		wantStateChanges(h, batched, "p-park", "pending>processing", "processing>needs_review")
		wantStateChanges(h, batched, "p-done", "pending>processing", "processing>completed")
		wantStateChanges(h, batched, "hung-1", "pending>processing", "processing>retrying", "retrying>completed")
	})
}

// testBatchTrailParallelRoots: two runs whose two root steps are claimed in one call, each
// changing the run's state: the first is taken (pending → processing) and the second
// conflicts with a completed key (→ needs_review) or, after a skip, reuses it (→
// completed). Both changes are appended, each after its item's events.
func testBatchTrailParallelRoots(h *harness) {
	h.compareTrails(func(d *trailDriver) {
		d.start([]store.RunInsertParams{trailParams("seed", base, map[string]string{"s": "k-seed", "s.fp": "fpA"}, step("s"))})
		d.round(base, func(_ *store.ClaimedStep, p *store.StepRecordParams) []store.StepRecordParams {
			return []store.StepRecordParams{*p}
		})
		d.start([]store.RunInsertParams{
			trailParams("p-park", at(time.Second), map[string]string{"b": "k-seed", "b.fp": "fpB"}, step("a"), step("b")),
			trailParams("p-done", at(time.Second), map[string]string{"a": "skip", "b": "k-seed", "b.fp": "fpA"}, step("a"), step("b")),
		})
		d.round(at(time.Second), func(_ *store.ClaimedStep, p *store.StepRecordParams) []store.StepRecordParams {
			return []store.StepRecordParams{*p}
		})
	}, func(h *harness, single, batched *trailState) {
		wantStateChanges(h, batched, "p-park", "pending>processing", "processing>needs_review")
		wantStateChanges(h, batched, "p-done", "pending>processing", "processing>completed")
		// Each change follows the event of the item that caused it.
		want := []string{
			"run.created", "step.claimed a", "run.state_changed", "effect.key_conflict b", "step.needs_review b", "run.state_changed",
			"step.completed a",
		}
		if got := batched.typesOf("p-park"); !slices.Equal(got, want) {
			h.t.Errorf("p-park events\n got %q\nwant %q", got, want)
		}
		want = []string{
			"run.created", "step.skipped a", "run.state_changed", "effect.reused b", "step.completed b", "run.state_changed",
		}
		if got := batched.typesOf("p-done"); !slices.Equal(got, want) {
			h.t.Errorf("p-done events\n got %q\nwant %q", got, want)
		}
	})
}

// trailParams is a start of the default workflow whose input names some steps' keys (see
// trailPrepare), due at now.
func trailParams(key string, now time.Time, in map[string]string, steps ...store.StepInsert) store.RunInsertParams {
	if in == nil {
		in = map[string]string{}
	}
	input, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	return store.RunInsertParams{Workflow: defaultWorkflow, RunKey: key, Entity: "entity:" + key, Input: input, InputHash: "hash-" + key,
		Actor: "test", Now: now, Steps: steps}
}

// trailPrepare is the Prepare of the trail scenarios: a step named in its run's input acts
// under that key (fingerprint "<step>.fp"), is skipped for "skip" and fails to prepare for
// "bad"; any other step acts under "<run key>/<step>".
func trailPrepare(c *store.ClaimCandidate) (store.EffectSpec, error) {
	var in map[string]string
	if err := json.Unmarshal(c.Run.Input, &in); err != nil {
		return store.EffectSpec{}, err
	}
	switch k := in[c.Step.Name]; k {
	case "skip":
		return store.EffectSpec{Skip: store.ReasonConditionFalse}, nil
	case "bad":
		return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonInvalidKey, Err: errors.New("no key")}
	case "":
		return store.EffectSpec{Key: c.Run.RunKey + "/" + c.Step.Name}, nil
	default:
		return store.EffectSpec{Key: k, Fingerprint: in[c.Step.Name+".fp"]}, nil
	}
}

// trailSuccess is the record of a successful attempt of c at now.
func trailSuccess(c *store.ClaimedStep, now time.Time) store.StepRecordParams {
	return store.StepRecordParams{StepID: c.Step.ID, Owner: c.Step.LeaseOwner, Attempt: c.Step.Attempt, Now: now, Outcome: store.OutcomeSuccess,
		Output: json.RawMessage(fmt.Sprintf(`{"step": %q}`, c.Step.Name)), NextState: store.StateCompleted}
}

// trailDriver drives a scenario through one store with calls of at most batch items.
type trailDriver struct {
	h     *harness
	s     store.Store
	batch int
	keys  map[int64]string // run keys by run ID
}

func (d *trailDriver) runKey(id int64) string {
	if k, ok := d.keys[id]; ok {
		return k
	}
	r, err := d.s.RunGetByID(d.h.ctx, id)
	if err != nil {
		d.h.t.Fatalf("RunGetByID(%d): %v", id, err)
	}
	d.keys[id] = r.RunKey
	return r.RunKey
}

// start starts the runs of ps.
func (d *trailDriver) start(ps []store.RunInsertParams) {
	d.h.t.Helper()
	for chunk := range slices.Chunk(ps, d.batch) {
		res, err := d.s.RunInsertMany(d.h.ctx, chunk)
		if err != nil {
			d.h.t.Fatalf("RunInsertMany: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				d.h.t.Fatalf("RunInsertMany: %v", r.Err)
			}
		}
	}
}

// round claims every step due at now, then records what decide returns for each claimed
// step (given the record of a success, which it may change), in claim order. It returns the
// claimed steps decide recorded nothing for.
func (d *trailDriver) round(now time.Time, decide func(c *store.ClaimedStep, p *store.StepRecordParams) []store.StepRecordParams) []*store.ClaimedStep {
	d.h.t.Helper()
	var claimed []*store.ClaimedStep
	for {
		res, err := d.s.StepClaim(d.h.ctx, store.StepClaimParams{Owner: defaultOwner, Now: now, LeaseFor: time.Minute, Limit: d.batch,
			Workflows: []string{defaultWorkflow}, Prepare: trailPrepare, WaitFor: time.Second})
		if err != nil {
			d.h.t.Fatalf("StepClaim: %v", err)
		}
		claimed = append(claimed, res.Claimed...)
		n := len(res.Claimed) + res.Reused + res.Skipped + res.Parked + res.Waiting
		if n < d.batch {
			break
		}
		if d.batch == trailBatch {
			d.h.t.Fatalf("a round of the scenario has %d due steps or more: make trailBatch larger", n)
		}
	}
	var recs []store.StepRecordParams
	var left []*store.ClaimedStep
	for _, c := range claimed {
		p := trailSuccess(c, now)
		got := decide(c, &p)
		if len(got) == 0 {
			left = append(left, c)
		}
		recs = append(recs, got...)
	}
	d.record(recs)
	return left
}

// record records recs.
func (d *trailDriver) record(recs []store.StepRecordParams) {
	d.h.t.Helper()
	for chunk := range slices.Chunk(recs, d.batch) {
		if _, err := d.s.StepRecord(d.h.ctx, chunk); err != nil {
			d.h.t.Fatalf("StepRecord: %v", err)
		}
	}
}

// reap reaps every step whose lease expired before now.
func (d *trailDriver) reap(now time.Time, decide func(*store.Step) store.ReapDecision) {
	d.h.t.Helper()
	for {
		n, err := d.s.StepReapExpired(d.h.ctx, store.StepReapParams{Now: now, Limit: d.batch, Decide: decide})
		if err != nil {
			d.h.t.Fatalf("StepReapExpired: %v", err)
		}
		if n < d.batch {
			return
		}
	}
}

// trailState is what a store holds after a scenario, with IDs replaced by run keys and step
// names: the events in ID order, the runs with their steps and attempts, and the ledger.
type trailState struct {
	events []string
	runs   []string
	ledger []string
	byRun  map[string][]string // the events of each run, in order
	types  map[string][]string // "<type> <step>" of each run's events, in order
}

func (st *trailState) typesOf(runKey string) []string { return st.types[runKey] }

// compareTrails runs scenario one item per call on the harness's store and in batches on a
// fresh store, requires the same state from both, then calls check.
func (h *harness) compareTrails(scenario func(d *trailDriver), check func(h *harness, single, batched *trailState)) {
	h.t.Helper()
	drive := func(s store.Store, batch int) *trailState {
		d := &trailDriver{h: h, s: s, batch: batch, keys: map[int64]string{}}
		scenario(d)
		return d.state()
	}
	single := drive(h.s, 1)
	batched := drive(h.newStore(h.t), trailBatch)
	if len(single.events) == 0 {
		h.t.Fatal("the scenario appended no events")
	}
	var keys []string
	for k := range single.byRun {
		keys = append(keys, k)
	}
	for k := range batched.byRun {
		if _, ok := single.byRun[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Equal(batched.byRun[k], single.byRun[k]) {
			h.t.Errorf("the events of run %s differ between batches and single items:\n%s", k, diffLines(single.byRun[k], batched.byRun[k]))
		}
	}
	for _, part := range []struct {
		name      string
		got, want []string
	}{{"events (in ID order)", batched.events, single.events}, {"runs and steps", batched.runs, single.runs}, {"ledger", batched.ledger, single.ledger}} {
		if !slices.Equal(part.got, part.want) {
			h.t.Errorf("%s differ between batches and single items:\n%s", part.name, diffLines(part.want, part.got))
		}
	}
	check(h, single, batched)
}

// state reads what the driver's store holds.
func (d *trailDriver) state() *trailState {
	h, s := d.h, d.s
	h.t.Helper()
	out := &trailState{byRun: map[string][]string{}, types: map[string][]string{}}
	runs, err := s.RunList(h.ctx, store.RunListParams{Limit: 1000})
	if err != nil {
		h.t.Fatalf("RunList: %v", err)
	}
	slices.SortFunc(runs, func(a, b *store.Run) int { return strings.Compare(a.RunKey, b.RunKey) })
	stepNames := map[int64]string{}
	keys := map[string]bool{}
	for _, r := range runs {
		d.keys[r.ID] = r.RunKey
		out.runs = append(out.runs, fmt.Sprintf("run %s %s entity=%s created=%s updated=%s", r.RunKey, r.State, r.Entity,
			r.CreatedAt.Format(time.RFC3339Nano), r.UpdatedAt.Format(time.RFC3339Nano)))
		steps, err := s.StepListByRun(h.ctx, r.ID)
		if err != nil {
			h.t.Fatalf("StepListByRun(%d): %v", r.ID, err)
		}
		for _, st := range steps {
			stepNames[st.ID] = r.RunKey + "/" + st.Name
			out.runs = append(out.runs, fmt.Sprintf("  step %s %s needs=%v waiting=%d attempt=%d base=%d key=%s fp=%s reason=%s next=%s owner=%s lease=%s outcome=%s error=%q output=%s updated=%s",
				st.Name, st.State, st.Needs, st.Waiting, st.Attempt, st.AttemptBase, st.EffectKey, st.Fingerprint, st.Reason,
				st.NextAt.Format(time.RFC3339Nano), st.LeaseOwner, st.LeaseExpiresAt.Format(time.RFC3339Nano), st.LastOutcome, d.text(st.LastError),
				st.Output, st.UpdatedAt.Format(time.RFC3339Nano)))
			if st.EffectKey != "" {
				keys[st.EffectKey] = true
			}
		}
		attempts, err := s.AttemptListByRun(h.ctx, r.ID)
		if err != nil {
			h.t.Fatalf("AttemptListByRun(%d): %v", r.ID, err)
		}
		for _, a := range attempts {
			out.runs = append(out.runs, fmt.Sprintf("  attempt %s #%d key=%s worker=%s started=%s ended=%s outcome=%s error=%q status=%d excerpt=%q",
				a.StepName, a.Number, a.EffectKey, a.Worker, a.StartedAt.Format(time.RFC3339Nano), a.EndedAt.Format(time.RFC3339Nano),
				a.Outcome, d.text(a.Error), a.ResponseStatus, a.ResponseExcerpt))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		e, err := s.EffectGetByKey(h.ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			out.ledger = append(out.ledger, k+" free")
			continue
		}
		if err != nil {
			h.t.Fatalf("EffectGetByKey(%q): %v", k, err)
		}
		out.ledger = append(out.ledger, fmt.Sprintf("%s %s held by %s (%s, run %s) fp=%s result=%s created=%s completed=%s retain=%s", k, e.State,
			stepNames[e.StepID], e.StepName, d.runKey(e.RunID), e.Fingerprint, e.Result, e.CreatedAt.Format(time.RFC3339Nano),
			e.CompletedAt.Format(time.RFC3339Nano), e.RetainUntil.Format(time.RFC3339Nano)))
	}

	evs, err := s.EventList(h.ctx, store.EventListParams{Limit: 100000})
	if err != nil {
		h.t.Fatalf("EventList: %v", err)
	}
	for _, e := range evs {
		run := d.runKey(e.RunID)
		stepName := ""
		if e.StepID != 0 {
			stepName = strings.TrimPrefix(stepNames[e.StepID], run+"/")
			if stepName != e.StepName {
				h.t.Errorf("event %d %s: step %d is %q, the event names %q", e.ID, e.Type, e.StepID, stepNames[e.StepID], e.StepName)
			}
		}
		line := fmt.Sprintf("%s %s %s key=%s attempt=%d actor=%s reason=%s at=%s workflow=%s entity=%s %s", run, e.Type, stepName, e.EffectKey,
			e.Attempt, e.Actor, e.Reason, e.At.Format(time.RFC3339Nano), e.Workflow, e.Entity, d.detail(e))
		out.events = append(out.events, line)
		out.byRun[run] = append(out.byRun[run], line)
		out.types[run] = append(out.types[run], strings.TrimSpace(string(e.Type)+" "+e.StepName))
	}
	return out
}

// runRef matches a run named by ID in free text (an error message).
var runRef = regexp.MustCompile(`\brun (\d+)\b`)

// text returns s with the runs it names by ID named by run key.
func (d *trailDriver) text(s string) string {
	return runRef.ReplaceAllStringFunc(s, func(m string) string {
		id, err := strconv.ParseInt(m[len("run "):], 10, 64)
		if err != nil {
			return m
		}
		return "run " + d.runKey(id)
	})
}

// detail returns an event's detail with the run IDs it names ("…_run" fields, or in text)
// replaced by run keys, its fields sorted.
func (d *trailDriver) detail(e *store.Event) string {
	dec := json.NewDecoder(bytes.NewReader(e.Detail))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		d.h.t.Fatalf("event %d %s: detail %s is not a JSON object: %v", e.ID, e.Type, e.Detail, err)
	}
	for k, v := range m {
		if n, ok := v.(json.Number); ok && strings.HasSuffix(k, "_run") {
			id, err := n.Int64()
			if err != nil {
				d.h.t.Fatalf("event %d %s: %s = %v", e.ID, e.Type, k, v)
			}
			m[k] = "run " + d.runKey(id)
		}
		if t, ok := v.(string); ok {
			m[k] = d.text(t)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		d.h.t.Fatal(err)
	}
	return string(b)
}

// wantStateChanges checks the run.state_changed events of a run ("<from>><to>", in order).
func wantStateChanges(h *harness, st *trailState, runKey string, want ...string) {
	h.t.Helper()
	var got []string
	for _, l := range st.byRun[runKey] {
		if !strings.HasPrefix(l, runKey+" "+string(store.EventRunStateChanged)+" ") {
			continue
		}
		i := strings.LastIndex(l, " {")
		var d struct{ From, To string }
		if err := json.Unmarshal([]byte(l[i+1:]), &d); err != nil {
			h.t.Fatalf("%s: %v", l, err)
		}
		got = append(got, d.From+">"+d.To)
	}
	if !slices.Equal(got, want) {
		h.t.Errorf("run %s state changes %q, want %q", runKey, got, want)
	}
}

// diffLines shows the first lines where want and got differ.
func diffLines(want, got []string) string {
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(want), len(got)) && shown < 10; i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i, w, g)
			shown++
		}
	}
	return b.String()
}
