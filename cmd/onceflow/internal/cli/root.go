// Package cli implements the onceflow command: one cobra command tree whose subcommands
// (migrate, runs, demo, version) each live in their own file. The library itself does not
// depend on this package, so cobra never reaches the build of a program that only
// imports onceflow.
//
// Execute runs the command tree in-process against the given arguments and writers and
// returns the exit status: 0 on success, 1 when a command fails, 2 for a usage error.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/postgres"
	"github.com/onceflow/onceflow/store/sqlite"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Main runs the command with the process's arguments and exits. It is all cmd/onceflow does.
func Main() { mainWith(nil) }

// mainWith is Main, middleware wrapping the API of every server the command builds (nil:
// none).
func mainWith(middleware func(http.Handler) http.Handler) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr, middleware)
	stop()
	os.Exit(code)
}

// Execute runs the command tree with args, writing output to stdout and errors to stderr,
// and returns the exit status.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return execute(ctx, args, stdout, stderr, nil)
}

// execute is Execute, middleware wrapping the API of every server the commands build
// (server.Config.Middleware; nil: none).
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, middleware func(http.Handler) http.Handler) int {
	root := newRootCommand(stdout, stderr, middleware)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code // the command printed its answer; the status is part of it
	}
	outf(stderr, "onceflow: %s\n", multiline(err.Error()))
	var ue *usageError
	if errors.As(err, &ue) {
		if cmd != nil {
			outf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
		return exitUsage
	}
	return exitError
}

// usageError is an error in how the command was called: a bad flag, a missing argument.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// statusError ends a command that succeeded with an exit status that answers a question
// (keys show: 3 in flight, 4 never seen, 5 released), printing nothing more.
type statusError struct{ code int }

func (e *statusError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// globals holds the persistent flags every subcommand shares.
type globals struct {
	db     string
	stdout io.Writer
	stderr io.Writer
	// log, when set, receives what opening the database warns about (serve and worker set
	// their logger); otherwise warnings go to stderr as text.
	log *slog.Logger
	// middleware, when set, wraps the API of every server the commands build
	// (server.Config.Middleware).
	middleware func(http.Handler) http.Handler
}

// logger is where the commands' warnings go.
func (g *globals) logger() *slog.Logger {
	if g.log != nil {
		return g.log
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func newRootCommand(stdout, stderr io.Writer, middleware func(http.Handler) http.Handler) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr, middleware: middleware}
	root := &cobra.Command{
		Use:   "onceflow",
		Short: "Run business automations whose side effects happen once",
		Long: `onceflow runs business automations (a form to a CRM, an e-mail and a chat message; a
payment to an order and an invoice) so that retries, repeated webhooks, double clicks and
crashes never perform the same business action twice, and never lose one.

Try it with no setup:  onceflow demo`,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRunE,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	// cobra's completion command: onceflow completion bash|zsh|fish|powershell.
	root.CompletionOptions.HiddenDefaultCmd = false

	def := defaultDB
	if env := os.Getenv("ONCEFLOW_DB"); env != "" {
		def = env
	}
	root.PersistentFlags().StringVar(&g.db, "db", def,
		"database: "+acceptedDBForms+" (env ONCEFLOW_DB). A password written in --db is visible to every user of this machine in the process list: put the URL in ONCEFLOW_DB instead, or the password in PGPASSWORD or ~/.pgpass")
	// The default shown by --help comes from ONCEFLOW_DB: never print its password.
	root.PersistentFlags().Lookup("db").DefValue = maskPassword(def)

	root.AddCommand(
		newMigrateCommand(g),
		newServeCommand(g),
		newWorkerCommand(g),
		newValidateCommand(g),
		newRunsCommand(g),
		newReviewCommand(g),
		newAuditCommand(g),
		newKeysCommand(g),
		newDemoCommand(g),
		newBenchCommand(g),
		newPurgeCommand(g),
		newSchedulesCommand(g),
		newVersionCommand(g),
		newSchemaCommand(g),
	)
	root.AddCommand(newPauseCommand(g), newResumeCommand(g), newPausedCommand(g))
	return root
}

// groupRunE runs a command that only groups subcommands: with no arguments it prints its
// help; an argument is an unknown subcommand.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef("%s", msg)
}

// exactArgs is cobra.ExactArgs returning a usage error with the argument's name.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return usagef("%s needs %s", cmd.CommandPath(), strings.Join(names, " "))
		}
		if len(args) > len(names) {
			return usagef("%s takes %d argument(s) (%s), got %d", cmd.CommandPath(), len(names), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// noArgs is cobra.NoArgs returning a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}

// location parses --db.
func (g *globals) location() (dbLocation, error) {
	loc, err := parseDBURL(g.db)
	if err != nil {
		return dbLocation{}, &usageError{err: err}
	}
	return loc, nil
}

// cliStore is what the commands need of a store.
type cliStore interface {
	store.Store
	SchemaVersion(ctx context.Context) (applied, known int, err error)
}

var (
	_ cliStore = (*sqlite.Store)(nil)
	_ cliStore = (*postgres.Store)(nil)
)

// openStore opens the database named by --db. With mustExist, a missing SQLite file is an
// error instead of a new empty database.
func (g *globals) openStore(ctx context.Context, mustExist bool) (cliStore, dbLocation, error) {
	loc, err := g.location()
	if err != nil {
		return nil, loc, err
	}
	return openLocation(ctx, loc, mustExist, g.logger())
}

// openLocation opens the database at loc; log receives the warning about a SQLite file
// that others can read.
func openLocation(ctx context.Context, loc dbLocation, mustExist bool, log *slog.Logger) (cliStore, dbLocation, error) {
	if loc.Scheme == "postgres" {
		s, err := postgres.Open(ctx, loc.ConnString, postgres.Options{Schema: loc.Schema})
		if err != nil {
			return nil, loc, err
		}
		return s, loc, nil
	}
	if mustExist {
		if _, err := os.Stat(loc.Path); errors.Is(err, os.ErrNotExist) {
			return nil, loc, fmt.Errorf("no database at %s; create one with 'onceflow migrate --db %s', or point --db (or ONCEFLOW_DB) at an existing one", loc.Path, loc.URL())
		}
	}
	s, err := sqlite.Open(ctx, loc.Path, sqlite.Options{Logger: log})
	if err != nil {
		return nil, loc, err
	}
	return s, loc, nil
}
