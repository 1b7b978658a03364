package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/server"
)

func newWorkerCommand(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Execute workflow steps, without serving the API",
		Long: `worker loads the workflow files of --workflows, consumes the queues they declare and
executes their steps until it receives SIGINT or SIGTERM, like serve but without the HTTP API,
the webhooks and the console. Run any number of workers, on any number of machines, against
one PostgreSQL database (--db postgres://…): each step is claimed by one worker at a time, a
worker that dies has its steps taken over when its lease expires, and one worker at a time
reaps expired leases; the workers share each queue, the broker handing each message to one
of them. With --metrics-addr it serves Prometheus metrics at /metrics on that address. On
SIGHUP it reads the workflow files again, as serve does.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			log, err := newLogger(g, f.logLevel)
			if err != nil {
				return err
			}
			g.log = log
			st, loc, err := g.openStore(ctx, false)
			if err != nil {
				return err
			}
			defer st.Close()
			cfg, err := f.serverConfig(g, st, log, processSecrets(loc, nil))
			if err != nil {
				return err
			}
			if f.metricsAddr != "" {
				cfg.Metrics = &server.MetricsConfig{Addr: f.metricsAddr}
			}
			srv, err := newServer(ctx, cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			reloadOnHangup(ctx, srv, f.workflows)
			srv.Logger().Info("onceflow worker running", "worker", srv.Client().WorkerID(), "db", loc.URL(), "workflows", srv.Client().Workflows())
			return srv.Run(ctx)
		},
	}
	stepFlags(cmd, &f)
	return cmd
}

// newLogger returns the JSON logger of long-running commands.
func newLogger(g *globals, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q is not debug, info, warn or error", level)
	}
	// Durations print as "1.2s", not as nanoseconds.
	return slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: l,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return onceflow.DurationText(a) }})), nil
}
