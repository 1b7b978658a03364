package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// TestBatchesMatchSingleItems drives the same runs through two stores, one item per call
// in the first and everything due in one call in the second, and requires the same audit
// trail, step rows and ledger from both: batching changes how many transactions there are,
// never what happens to an item, which events it appends or in which order.
func TestBatchesMatchSingleItems(t *testing.T) {
	t.Parallel()
	single := batchScenario(t, 1)
	batched := batchScenario(t, 100)
	if len(single.events) == 0 {
		t.Fatal("the scenario appended no events")
	}
	for _, part := range []struct {
		name      string
		got, want []string
	}{{"events", batched.events, single.events}, {"steps", batched.steps, single.steps}, {"effects", batched.effects, single.effects}} {
		if !slices.Equal(part.got, part.want) {
			t.Errorf("%s differ between batches and single items:\n%s", part.name, diffLines(part.want, part.got))
		}
	}
}

type scenarioResult struct {
	events, steps, effects []string
}

// batchScenario runs the scenario with calls of at most batch items. Its runs cover each
// claim decision and each propagation: parallel steps joined by a third (one run's join is
// cancelled by a failure, another's skipped by a false condition), steps sharing a key
// (the first takes it, the others wait, then reuse its result or conflict with it), and a
// step whose Prepare fails.
func batchScenario(t *testing.T, batch int) scenarioResult {
	t.Helper()
	ctx := t.Context()
	s := openStore(t, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	join := []store.StepInsert{{Name: "a"}, {Name: "b"}, {Name: "c", Needs: []string{"a", "b"}}, {Name: "d", Needs: []string{"c"}}}
	var ps []store.RunInsertParams
	for i := range 12 {
		input := map[string]string{}
		switch i % 4 {
		case 1:
			input["b"] = "skip"
		case 2:
			// The last step, so that a reuse releases nothing: with one item per call,
			// a step released by a claim would be claimed in the same round.
			input["d"], input["d.fp"] = "shared", "fp1"
			if i == 10 {
				input["d.fp"] = "fp2" // completed by run 2 with another request: a key conflict
			}
		case 3:
			input["a"] = "bad"
		}
		in, err := json.Marshal(input)
		if err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("r%02d", i)
		ps = append(ps, store.RunInsertParams{Workflow: "orders", RunKey: key, Entity: "order:" + key, Input: in, InputHash: "h",
			Steps: join, Actor: "test", Now: base})
	}
	ps = append(ps, ps[0]) // a repeated start
	for chunk := range slices.Chunk(ps, batch) {
		res, err := s.RunInsertMany(ctx, chunk)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}

	prepare := func(c *store.ClaimCandidate) (store.EffectSpec, error) {
		var in map[string]string
		if err := json.Unmarshal(c.Run.Input, &in); err != nil {
			return store.EffectSpec{}, err
		}
		switch k := in[c.Step.Name]; k {
		case "skip":
			return store.EffectSpec{Skip: "condition_false"}, nil
		case "bad":
			return store.EffectSpec{}, &store.PrepareError{Reason: store.ReasonInvalidKey, Err: errors.New("no key")}
		case "":
			return store.EffectSpec{Key: c.Run.RunKey + "/" + c.Step.Name}, nil
		default:
			return store.EffectSpec{Key: k, Fingerprint: in[c.Step.Name+".fp"]}, nil
		}
	}
	now := base
	for round := 0; round < 20; round++ {
		now = now.Add(2 * time.Second)
		var claimed []*store.ClaimedStep
		for {
			res, err := s.StepClaim(ctx, store.StepClaimParams{Owner: "w1", Now: now, LeaseFor: time.Minute, Limit: batch,
				Workflows: []string{"orders"}, Prepare: prepare, WaitFor: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			claimed = append(claimed, res.Claimed...)
			if n := len(res.Claimed) + res.Reused + res.Skipped + res.Parked + res.Waiting; n < batch {
				break
			}
		}
		if len(claimed) == 0 {
			continue
		}
		var recs []store.StepRecordParams
		for _, c := range claimed {
			p := store.StepRecordParams{StepID: c.Step.ID, Owner: "w1", Attempt: c.Step.Attempt, Now: now, Outcome: store.OutcomeSuccess,
				Output: json.RawMessage(fmt.Sprintf(`{"step": %q}`, c.Step.Name)), NextState: store.StateCompleted}
			if c.Run.RunKey == "r04" && c.Step.Name == "b" {
				p.Outcome, p.Error, p.NextState, p.Output = store.OutcomePermanent, "400 Bad Request", store.StateFailed, nil
			}
			if c.Run.RunKey == "r08" && c.Step.Name == "a" {
				recs = append(recs, p) // recorded twice: the second is a lost lease
			}
			if c.Run.RunKey == "r00" && c.Step.Name == "b" {
				p.Outcome, p.NextState, p.NextAt, p.Reason = store.OutcomeRetryable, store.StateRetrying, now.Add(time.Second), store.ReasonRetryableError
			}
			recs = append(recs, p)
		}
		for chunk := range slices.Chunk(recs, batch) {
			if _, err := s.StepRecord(ctx, chunk); err != nil {
				t.Fatal(err)
			}
		}
	}

	var out scenarioResult
	evs, err := s.EventList(ctx, store.EventListParams{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		out.events = append(out.events, fmt.Sprintf("%d %s run=%d step=%d %s key=%s attempt=%d actor=%s reason=%s %s",
			e.ID, e.Type, e.RunID, e.StepID, e.StepName, e.EffectKey, e.Attempt, e.Actor, e.Reason, e.Detail))
	}
	runs, err := s.RunList(ctx, store.RunListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range runs {
		out.steps = append(out.steps, fmt.Sprintf("run %s %s updated %s", r.RunKey, r.State, r.UpdatedAt))
		steps, err := s.StepListByRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			out.steps = append(out.steps, fmt.Sprintf("  %s %s waiting=%d attempt=%d key=%s reason=%s next=%s output=%s",
				st.Name, st.State, st.Waiting, st.Attempt, st.EffectKey, st.Reason, st.NextAt, st.Output))
			keys[st.EffectKey] = st.EffectKey != ""
		}
	}
	for k, ok := range keys {
		if !ok {
			continue
		}
		e, err := s.EffectGetByKey(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			out.effects = append(out.effects, k+" free")
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out.effects = append(out.effects, fmt.Sprintf("%s %s step=%d fp=%s result=%s", k, e.State, e.StepID, e.Fingerprint, e.Result))
	}
	slices.Sort(out.effects)
	return out
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

func TestRunInsertManyNilInput(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	res, err := s.RunInsertMany(t.Context(), []store.RunInsertParams{
		{Workflow: "orders", RunKey: "none", Now: base, Steps: []store.StepInsert{{Name: "a"}}},
		{Workflow: "orders", RunKey: "some", Input: json.RawMessage(`null`), Now: base, Steps: []store.StepInsert{{Name: "a"}}},
	})
	if err != nil {
		t.Fatalf("RunInsertMany: %v", err)
	}
	if res[0].Err == nil || res[0].Run != nil {
		t.Errorf("a nil input: %+v, want its own error", res[0])
	}
	if res[1].Err != nil || !res[1].Created {
		t.Errorf("the other param: %+v, want created", res[1])
	}
}
