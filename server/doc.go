// Package server is onceflow's composition root: from workflow files and a Config to a
// running client with its triggers, and, as configured, the JSON API with the webhook
// receivers, the web console and the Prometheus metrics, with reloading. onceflow serve
// and onceflow worker are this package behind flags; a Go program embeds the same.
//
// # Embedding the server
//
// Open a store, say which files to load and what to serve, then New and Run:
//
//	st, err := sqlite.Open(ctx, "onceflow.db", sqlite.Options{})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	tokens, err := onceflowhttp.ParseTokens(os.Getenv("ONCEFLOW_API_TOKENS"))
//	if err != nil {
//		return err
//	}
//	srv, err := server.New(ctx, server.Config{
//		Store:     st,
//		Workflows: []string{"workflows/"},
//		Funcs:     map[string]onceflow.StepFunc{"score": score}, // the files' kind: go steps
//		Engine:    onceflow.Config{Workers: 20},
//		API:       &server.APIConfig{Addr: "127.0.0.1:8080", Tokens: tokens},
//		Console:   &server.ConsoleConfig{}, // at /ui/ on the API
//		Metrics:   &server.MetricsConfig{}, // at /metrics on the API
//		Logger:    slog.Default(),
//	})
//	if err != nil {
//		return err // flowfile.Problems: what to fix in the files, with line and column
//	}
//	defer srv.Close()
//	return srv.Run(ctx) // until ctx ends; then stops HTTP, the consumers, the engine
//
// New does everything that can fail before anything runs: it loads and checks the files
// (every {env.NAME} a step reads must be set, every webhook secret usable, every broker
// URL of a queue set), builds the steps, creates the client and registers the workflows,
// their schedules and their triggers' companion workflows, builds the API and the console
// and opens the listeners. Run executes steps, runs the queue consumers and serves.
//
// # Workers
//
// A Config without API is a worker: it executes steps and consumes the files' queues,
// and serves nothing but, with Metrics.Addr, its metrics. Any number of workers on any
// number of machines share one PostgreSQL database: each step is claimed by one worker at
// a time, and a queue's broker hands each message to one consumer — a message
// redelivered to another after a crash finds its run by its key.
//
// # Triggers
//
// The files' triggers are built with the server: a queue: block becomes a queue consumer
// (package triggers/natsqueue or triggers/amqpqueue) that every server runs, a webhook:
// block a receiver (package triggers/webhook) that the API serves, a schedule: block a
// schedule the engine's leader fires. See package triggers for writing one.
//
// # Reloading
//
// Reload reads the files again and, only if every one is valid, puts the new definitions
// in place at once: workflows, schedules, companions and webhook receivers. A reload is
// refused, with a problem saying so, when a change needs a restart: a file that reads an
// environment variable no file read at start, changed notify: settings, or changed queue:
// settings (a queue added, removed or reconfigured: its consumer runs from start to
// stop). POST /v1/admin/reload calls it; onceflow serve and worker call it on SIGHUP.
package server
