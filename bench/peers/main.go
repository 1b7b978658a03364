// Command peers compares onceflow's throughput with River's on one PostgreSQL database,
// in one process run, so that anyone can rerun the comparison on their own machine.
//
// Each side gets a fresh schema, N no-op units of work inserted by C concurrent callers
// (one call per unit, as API requests would make them) and the same number of workers:
//
//   - River (github.com/riverqueue/river with riverpgxv5): a no-op worker on the default
//     queue with MaxWorkers W, FetchCooldown 2 ms, FetchPollInterval 20 ms, jobs unique by
//     args, one Client.Insert per job.
//   - onceflow: a one-step no-op workflow whose step has an effect key unique per run
//     ("noop:{run.key}"), Workers W, PollInterval 20 ms, one Client.Start per run with a
//     unique run key.
//
// With --batch B (500 by default) each round also measures both sides inserting in
// batches of B from the same goroutines: River's Client.InsertMany against onceflow's
// Client.StartMany, end to end, and prints that ratio too.
//
// The clock starts before the first insert and stops when the database says all N are
// completed. The workers count what they execute in memory; only once they have executed
// N does the program poll the database (every few milliseconds) for the completed count,
// so that the measurement adds no load while the work is under way. It prints River's
// jobs/s, onceflow's steps/s and the ratio onceflow/River; with --rounds it alternates
// the two sides and averages. Each schema is dropped as soon as its measurement ends,
// unless --keep.
//
// Usage:
//
//	go run . [--db URL] [--jobs 20000] [--concurrency 16] [--workers 100] [--rounds 1]
//	         [--pool 0] [--batch 500] [--keep] [--json] [--cpuprofile FILE]
//
// This is a separate Go module so that River never becomes a dependency of onceflow.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/duration"
)

const defaultDB = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// options configure one comparison.
type options struct {
	// DB is the PostgreSQL URL both sides use.
	DB string
	// Jobs is how many jobs (River) and runs (onceflow) each side executes per round.
	Jobs int
	// Concurrency is how many goroutines insert them, one call per job or run.
	Concurrency int
	// Workers is River's MaxWorkers on the default queue and onceflow's Workers.
	Workers int
	// Rounds is how many times each side is measured, alternating River and onceflow.
	Rounds int
	// Pool, when positive, sets pool_max_conns of both sides' connection pools; 0 keeps
	// what the URL says, or pgx's default (the larger of 4 and the number of CPUs).
	Pool int
	// Keep leaves the schemas in the database.
	Keep bool
	// Timeout bounds one side's measurement.
	Timeout time.Duration
	// Batch, when positive, also measures both sides inserting in batches of that many
	// jobs or runs: River's Client.InsertMany against onceflow's Client.StartMany, end to
	// end, from the same Concurrency goroutines. 0 leaves the batch rows out.
	Batch int
}

// sideResult is one measurement of one side.
type sideResult struct {
	Schema string `json:"schema"`
	// Seconds is from the first insert until all jobs or runs were completed.
	Seconds float64 `json:"seconds"`
	// InsertSeconds is from the first insert until the last insert returned.
	InsertSeconds float64 `json:"insert_seconds"`
	// PerSecond is Jobs / Seconds: jobs/s for River, steps/s for onceflow.
	PerSecond float64 `json:"per_second"`
}

// round is one measurement of both sides, one call per job or run and, with a batch size,
// in batches.
type round struct {
	Round         int         `json:"round"`
	River         sideResult  `json:"river"`
	Onceflow      sideResult  `json:"onceflow"`
	RiverBatch    *sideResult `json:"river_insert_many,omitempty"`
	OnceflowBatch *sideResult `json:"onceflow_start_many,omitempty"`
}

// report is what the program prints.
type report struct {
	Jobs              int     `json:"jobs"`
	Concurrency       int     `json:"concurrency"`
	Workers           int     `json:"workers"`
	Pool              int     `json:"pool_max_conns,omitempty"`
	RiverVersion      string  `json:"river_version"`
	Postgres          string  `json:"postgres"`
	CPUs              int     `json:"cpus"`
	Rounds            []round `json:"rounds"`
	RiverJobsPerSec   float64 `json:"river_jobs_per_sec"`
	OnceflowStepsPerS float64 `json:"onceflow_steps_per_sec"`
	Ratio             float64 `json:"ratio_onceflow_to_river"`
	// Batch is the batch size of the batch rows, 0 when they were left out; then the
	// figures below are 0 too.
	Batch                  int     `json:"batch,omitempty"`
	RiverBatchJobsPerSec   float64 `json:"river_insert_many_jobs_per_sec,omitempty"`
	OnceflowBatchStepsPerS float64 `json:"onceflow_start_many_steps_per_sec,omitempty"`
	BatchRatio             float64 `json:"ratio_start_many_to_insert_many,omitempty"`
}

func main() {
	var opts options
	var asJSON bool
	flag.StringVar(&opts.DB, "db", defaultDB, "PostgreSQL URL both sides use")
	flag.IntVar(&opts.Jobs, "jobs", 20000, "jobs (River) and runs (onceflow) per side and round")
	flag.IntVar(&opts.Concurrency, "concurrency", 16, "concurrent inserters, one Insert or Start per job")
	flag.IntVar(&opts.Workers, "workers", 100, "River MaxWorkers on the default queue and onceflow Workers")
	flag.IntVar(&opts.Rounds, "rounds", 1, "rounds, alternating River and onceflow; figures are averaged")
	flag.IntVar(&opts.Pool, "pool", 0, "pool_max_conns of each side's pool (0: the URL's or pgx's default)")
	flag.BoolVar(&opts.Keep, "keep", false, "keep the schemas instead of dropping them")
	flag.Var(duration.NewFlag(&opts.Timeout, 10*time.Minute), "timeout", "longest one side's measurement may take (such as 10m or 1h)")
	flag.IntVar(&opts.Batch, "batch", 500, "also measure River InsertMany against onceflow StartMany in batches of this many (0: not)")
	flag.BoolVar(&asJSON, "json", false, "print one JSON object instead of text")
	var cpuProfile string
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole comparison to this file; each measurement's samples carry the label side (River, onceflow, River InsertMany, onceflow StartMany): go tool pprof -tagfocus side=onceflow")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "peers: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := io.Writer(os.Stderr)
	if !asJSON {
		progress = os.Stdout
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
	}
	rep, err := compare(ctx, opts, progress)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(os.Stderr, "peers:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("River     %8.0f jobs/s\n", rep.RiverJobsPerSec)
	fmt.Printf("onceflow  %8.0f steps/s\n", rep.OnceflowStepsPerS)
	fmt.Printf("ratio onceflow/River  %.2f\n", rep.Ratio)
	if rep.Batch > 0 {
		fmt.Printf("River InsertMany     %8.0f jobs/s (batches of %d)\n", rep.RiverBatchJobsPerSec, rep.Batch)
		fmt.Printf("onceflow StartMany   %8.0f steps/s\n", rep.OnceflowBatchStepsPerS)
		fmt.Printf("ratio StartMany/InsertMany  %.2f\n", rep.BatchRatio)
	}
}

// compare measures both sides opts.Rounds times and writes a line per measurement to
// progress.
func compare(ctx context.Context, opts options, progress io.Writer) (*report, error) {
	switch {
	case opts.Jobs < 1:
		return nil, errors.New("--jobs must be at least 1")
	case opts.Concurrency < 1:
		return nil, errors.New("--concurrency must be at least 1")
	case opts.Workers < 1:
		return nil, errors.New("--workers must be at least 1")
	case opts.Rounds < 1:
		return nil, errors.New("--rounds must be at least 1")
	case opts.Pool < 0:
		return nil, errors.New("--pool must not be negative")
	case opts.Batch < 0 || opts.Batch > onceflow.DefaultMaxStartMany:
		return nil, fmt.Errorf("--batch must be between 0 and %d", onceflow.DefaultMaxStartMany)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	url := withPoolConns(opts.DB, opts.Pool)
	version, err := postgresVersion(ctx, url)
	if err != nil {
		return nil, err
	}
	rep := &report{
		Jobs:         opts.Jobs,
		Concurrency:  opts.Concurrency,
		Workers:      opts.Workers,
		Pool:         opts.Pool,
		Batch:        opts.Batch,
		RiverVersion: moduleVersion("github.com/riverqueue/river"),
		Postgres:     version,
		CPUs:         runtime.NumCPU(),
	}
	fmt.Fprintf(progress, "%d no-op jobs/runs per side, %d concurrent inserters, %d workers; PostgreSQL %s, River %s, %d CPUs\n",
		opts.Jobs, opts.Concurrency, opts.Workers, version, rep.RiverVersion, rep.CPUs)

	suffix := randomHex(4)
	line := func(i int, name, unit string, r sideResult) {
		fmt.Fprintf(progress, "round %d  %-18s %d in %6.2f s (inserts %5.2f s): %8.0f %s\n",
			i, name, opts.Jobs, r.Seconds, r.InsertSeconds, r.PerSecond, unit)
	}
	for i := 1; i <= opts.Rounds; i++ {
		rd := round{Round: i}
		rd.River, err = measureAs(ctx, "River", opts, url, fmt.Sprintf("river_peer_%s_%d", suffix, i), runRiver)
		if err != nil {
			return nil, fmt.Errorf("round %d: River: %w", i, err)
		}
		line(i, "River", "jobs/s", rd.River)
		rd.Onceflow, err = measureAs(ctx, "onceflow", opts, url, fmt.Sprintf("onceflow_peer_%s_%d", suffix, i), runOnceflow)
		if err != nil {
			return nil, fmt.Errorf("round %d: onceflow: %w", i, err)
		}
		line(i, "onceflow", "steps/s", rd.Onceflow)
		if opts.Batch > 0 {
			rb, err := measureAs(ctx, "River InsertMany", opts, url, fmt.Sprintf("river_peer_%s_%d_many", suffix, i), runRiverMany)
			if err != nil {
				return nil, fmt.Errorf("round %d: River InsertMany: %w", i, err)
			}
			line(i, "River InsertMany", "jobs/s", rb)
			ob, err := measureAs(ctx, "onceflow StartMany", opts, url, fmt.Sprintf("onceflow_peer_%s_%d_many", suffix, i), runOnceflowMany)
			if err != nil {
				return nil, fmt.Errorf("round %d: onceflow StartMany: %w", i, err)
			}
			line(i, "onceflow StartMany", "steps/s", ob)
			rd.RiverBatch, rd.OnceflowBatch = &rb, &ob
			rep.RiverBatchJobsPerSec += rb.PerSecond / float64(opts.Rounds)
			rep.OnceflowBatchStepsPerS += ob.PerSecond / float64(opts.Rounds)
		}
		rep.Rounds = append(rep.Rounds, rd)
		rep.RiverJobsPerSec += rd.River.PerSecond / float64(opts.Rounds)
		rep.OnceflowStepsPerS += rd.Onceflow.PerSecond / float64(opts.Rounds)
	}
	rep.Ratio = rep.OnceflowStepsPerS / rep.RiverJobsPerSec
	if opts.Batch > 0 {
		rep.BatchRatio = rep.OnceflowBatchStepsPerS / rep.RiverBatchJobsPerSec
	}
	return rep, nil
}

// measureAs is measure with the profile label side=name on every goroutine it starts.
func measureAs(ctx context.Context, name string, opts options, url, schema string, run side) (res sideResult, err error) {
	pprof.Do(ctx, pprof.Labels("side", name), func(ctx context.Context) {
		res, err = measure(ctx, opts, url, schema, run)
	})
	return res, err
}

// side runs one side's measurement in schema, which it creates, and reports how long
// the work took.
type side func(ctx context.Context, opts options, url, schema string) (sideResult, error)

// measure runs one side under opts.Timeout and drops its schema afterwards, unless
// opts.Keep, whether it succeeded or not.
func measure(ctx context.Context, opts options, url, schema string, run side) (sideResult, error) {
	if !opts.Keep {
		defer func() {
			// The caller's context may have ended (an interrupt): clean up regardless.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := dropSchema(dctx, url, schema); err != nil {
				fmt.Fprintf(os.Stderr, "peers: dropping schema %s: %v\n", schema, err)
			}
		}()
	}
	mctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	r, err := run(mctx, opts, url, schema)
	r.Schema = schema
	return r, err
}

// insertAll calls insert for 0..n-1 from conc goroutines and returns when every call has
// returned, with the first error.
func insertAll(ctx context.Context, n, conc int, insert func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := insert(ctx, i); err != nil {
					cancel(fmt.Errorf("insert %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// insertBatches calls insert for the batches [lo, hi) of size items that cover 0..n-1,
// from conc goroutines, and returns when every call has returned, with the first error.
func insertBatches(ctx context.Context, n, conc, size int, insert func(ctx context.Context, lo, hi int) error) error {
	batches := (n + size - 1) / size
	return insertAll(ctx, batches, conc, func(ctx context.Context, b int) error {
		return insert(ctx, b*size, min((b+1)*size, n))
	})
}

// waitCompleted returns once completed reports n. It queries the database only once the
// workers have executed n (executed, counted in memory), every 2 ms, so that it adds no
// load while the work is under way; as a safeguard it also looks every 5 s.
func waitCompleted(ctx context.Context, n int64, executed *atomic.Int64, completed func(context.Context) (int64, error)) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		if executed.Load() >= n || time.Since(last) >= 5*time.Second {
			last = time.Now()
			c, err := completed(ctx)
			if err != nil {
				return fmt.Errorf("counting completed: %w", err)
			}
			if c >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d completions (%d executed): %w", n, executed.Load(), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// withPoolConns sets pool_max_conns in a postgres:// URL or a key=value connection
// string, when n is positive.
func withPoolConns(url string, n int) string {
	if n <= 0 {
		return url
	}
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return fmt.Sprintf("%s pool_max_conns=%d", url, n)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%spool_max_conns=%d", url, sep, n)
}

// connect opens a single connection; pool settings in url, such as pool_max_conns, are
// ignored.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg.ConnConfig)
}

func postgresVersion(ctx context.Context, url string) (string, error) {
	conn, err := connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	if err := conn.QueryRow(ctx, `SHOW server_version`).Scan(&v); err != nil {
		return "", err
	}
	return v, nil
}

func createSchema(ctx context.Context, url, schema string) error {
	conn, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	return err
}

func dropSchema(ctx context.Context, url, schema string) error {
	conn, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// moduleVersion is the version of the module path this binary was built with.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range info.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}
