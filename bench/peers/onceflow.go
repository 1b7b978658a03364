package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
)

// noopWorkflow is the name of onceflow's one-step no-op workflow.
const noopWorkflow = "peer-noop"

// runOnceflow opens a store in a fresh schema, serves a one-step no-op workflow whose
// effect key is unique per run, starts opts.Jobs runs from opts.Concurrency goroutines,
// one Start each with a unique run key, and measures until all of them are completed.
func runOnceflow(ctx context.Context, opts options, url, schema string) (sideResult, error) {
	return onceflowSide(ctx, opts, url, schema, func(ctx context.Context, client *onceflow.Client) error {
		return insertAll(ctx, opts.Jobs, opts.Concurrency, func(ctx context.Context, i int) error {
			_, err := client.Start(ctx, noopWorkflow, fmt.Sprintf("run-%d", i), map[string]int{"n": i})
			return err
		})
	})
}

// runOnceflowMany is runOnceflow with the runs started in batches of opts.Batch, one
// Client.StartMany each.
func runOnceflowMany(ctx context.Context, opts options, url, schema string) (sideResult, error) {
	return onceflowSide(ctx, opts, url, schema, func(ctx context.Context, client *onceflow.Client) error {
		return insertBatches(ctx, opts.Jobs, opts.Concurrency, opts.Batch, func(ctx context.Context, lo, hi int) error {
			items := make([]onceflow.StartItem, 0, hi-lo)
			for i := lo; i < hi; i++ {
				items = append(items, onceflow.StartItem{RunKey: fmt.Sprintf("run-%d", i), Input: map[string]int{"n": i}})
			}
			res, err := client.StartMany(ctx, noopWorkflow, items)
			for j, r := range res {
				if r.Status != onceflow.StartCreated && err == nil {
					err = fmt.Errorf("run %s: %s (%v); every run key is new", items[j].RunKey, r.Status, r.Err)
				}
			}
			return err
		})
	})
}

// onceflowSide opens a store in a fresh schema, serves the no-op workflow, starts
// opts.Jobs runs with start and measures until all of them are completed.
func onceflowSide(ctx context.Context, opts options, url, schema string, start func(ctx context.Context, client *onceflow.Client) error) (sideResult, error) {
	var res sideResult
	st, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	if err != nil {
		return res, err
	}
	defer st.Close()

	var executed atomic.Int64
	client, err := onceflow.New(onceflow.Config{
		Store:        st,
		Workers:      opts.Workers,
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return res, err
	}
	err = client.Register(onceflow.Workflow{
		Name: noopWorkflow,
		Steps: []onceflow.Step{{
			ID:        "noop",
			EffectKey: "noop:{run.key}",
			Do: func(context.Context, *onceflow.StepContext) (any, error) {
				executed.Add(1)
				return nil, nil
			},
		}},
	})
	if err != nil {
		return res, err
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- client.Serve(sctx) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			fmt.Fprintln(os.Stderr, "peers: onceflow Serve:", err)
		}
	}()

	began := time.Now()
	if err := start(ctx, client); err != nil {
		return res, err
	}
	res.InsertSeconds = time.Since(began).Seconds()
	err = waitCompleted(ctx, int64(opts.Jobs), &executed, func(ctx context.Context) (int64, error) {
		runs, _, err := counts(ctx, st)
		return runs[store.StateCompleted], err
	})
	if err != nil {
		return res, err
	}
	res.Seconds = time.Since(began).Seconds()
	res.PerSecond = float64(opts.Jobs) / res.Seconds
	return res, checkOnceflow(ctx, st, opts.Jobs)
}

// counts returns the no-op workflow's runs and steps by state.
func counts(ctx context.Context, st store.StatsStore) (runs, steps map[store.State]int64, err error) {
	stats, err := st.StatsGet(ctx, store.StatsGetParams{Now: time.Now()})
	if err != nil {
		return nil, nil, err
	}
	runs, steps = map[store.State]int64{}, map[store.State]int64{}
	for _, c := range stats.Runs {
		if c.Workflow == noopWorkflow {
			runs[c.State] += c.Count
		}
	}
	for _, c := range stats.Steps {
		if c.Workflow == noopWorkflow {
			steps[c.State] += c.Count
		}
	}
	return runs, steps, nil
}

// checkOnceflow verifies that the store holds exactly n runs and n steps, all completed.
func checkOnceflow(ctx context.Context, st store.StatsStore, n int) error {
	runs, steps, err := counts(ctx, st)
	if err != nil {
		return fmt.Errorf("checking: %w", err)
	}
	total := func(m map[store.State]int64) (t int64) {
		for _, c := range m {
			t += c
		}
		return t
	}
	want := int64(n)
	if total(runs) != want || runs[store.StateCompleted] != want || total(steps) != want || steps[store.StateCompleted] != want {
		return fmt.Errorf("check: runs %v, steps %v; want %d runs and %d steps, all completed", runs, steps, n, n)
	}
	return nil
}
