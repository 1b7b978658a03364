package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs are the arguments of River's no-op job; N makes every job's args, hence its
// uniqueness hash, distinct.
type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "peer_noop" }

// InsertOpts makes the jobs unique by their args, as onceflow's runs are unique by run key.
func (noopArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// runRiver migrates a fresh schema, starts a River client with a no-op worker, inserts
// opts.Jobs jobs from opts.Concurrency goroutines, one Insert each, and measures until all
// of them are completed.
func runRiver(ctx context.Context, opts options, url, schema string) (sideResult, error) {
	return riverSide(ctx, opts, url, schema, func(ctx context.Context, client *river.Client[pgx.Tx], duplicates *atomic.Int64) error {
		return insertAll(ctx, opts.Jobs, opts.Concurrency, func(ctx context.Context, i int) error {
			r, err := client.Insert(ctx, noopArgs{N: i}, nil)
			if err == nil && r.UniqueSkippedAsDuplicate {
				duplicates.Add(1)
			}
			return err
		})
	})
}

// runRiverMany is runRiver with the jobs inserted in batches of opts.Batch, one
// Client.InsertMany each.
func runRiverMany(ctx context.Context, opts options, url, schema string) (sideResult, error) {
	return riverSide(ctx, opts, url, schema, func(ctx context.Context, client *river.Client[pgx.Tx], duplicates *atomic.Int64) error {
		return insertBatches(ctx, opts.Jobs, opts.Concurrency, opts.Batch, func(ctx context.Context, lo, hi int) error {
			params := make([]river.InsertManyParams, 0, hi-lo)
			for i := lo; i < hi; i++ {
				params = append(params, river.InsertManyParams{Args: noopArgs{N: i}})
			}
			res, err := client.InsertMany(ctx, params)
			for _, r := range res {
				if r.UniqueSkippedAsDuplicate {
					duplicates.Add(1)
				}
			}
			return err
		})
	})
}

// riverSide migrates a fresh schema, starts a River client with a no-op worker, inserts
// opts.Jobs jobs with insert and measures until all of them are completed.
func riverSide(ctx context.Context, opts options, url, schema string,
	insert func(ctx context.Context, client *river.Client[pgx.Tx], duplicates *atomic.Int64) error) (sideResult, error) {
	var res sideResult
	if err := createSchema(ctx, url, schema); err != nil {
		return res, fmt.Errorf("creating schema: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return res, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: logger})
	if err != nil {
		return res, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return res, fmt.Errorf("migrating: %w", err)
	}

	var executed atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error {
		executed.Add(1)
		return nil
	}))
	client, err := river.NewClient(driver, &river.Config{
		Schema:            schema,
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: opts.Workers}},
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Workers:           workers,
	})
	if err != nil {
		return res, err
	}
	if err := client.Start(ctx); err != nil {
		return res, fmt.Errorf("starting the client: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := client.Stop(sctx); err != nil {
			fmt.Fprintln(os.Stderr, "peers: stopping the River client:", err)
		}
	}()

	var duplicates atomic.Int64
	start := time.Now()
	if err := insert(ctx, client, &duplicates); err != nil {
		return res, err
	}
	res.InsertSeconds = time.Since(start).Seconds()
	if d := duplicates.Load(); d > 0 {
		return res, fmt.Errorf("%d inserts were skipped as duplicates; every job's args should be unique", d)
	}
	countSQL := `SELECT count(*) FROM ` + pgx.Identifier{schema, "river_job"}.Sanitize() + ` WHERE state = 'completed'`
	err = waitCompleted(ctx, int64(opts.Jobs), &executed, func(ctx context.Context) (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, countSQL).Scan(&n)
		return n, err
	})
	if err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.PerSecond = float64(opts.Jobs) / res.Seconds
	return res, checkRiver(ctx, pool, schema, opts.Jobs)
}

// checkRiver verifies that the schema holds exactly n jobs, all completed.
func checkRiver(ctx context.Context, pool *pgxpool.Pool, schema string, n int) error {
	var total, completed int64
	err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM `+
		pgx.Identifier{schema, "river_job"}.Sanitize()).Scan(&total, &completed)
	if err != nil {
		return fmt.Errorf("checking: %w", err)
	}
	if total != int64(n) || completed != int64(n) {
		return fmt.Errorf("check: %d jobs, %d completed; want %d of each", total, completed, n)
	}
	return nil
}
