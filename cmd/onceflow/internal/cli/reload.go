package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/server"
)

// reloadOnHangup reloads the server's workflows on every SIGHUP until ctx ends, logging
// what changed or, for a refused reload, every problem; the old definitions then keep
// running. where names the files for a problem that has no file of its own. It returns
// once the signal is being caught.
func reloadOnHangup(ctx context.Context, srv *server.Server, where string) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	log := srv.Logger()
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				res, err := srv.Reload(ctx)
				if err != nil {
					var problems []string
					for _, p := range asProblems(where, err) {
						problems = append(problems, p.String())
					}
					log.Error("SIGHUP: workflows not reloaded; the definitions loaded before keep running", "problems", problems)
					continue
				}
				log.Info("SIGHUP: workflows reloaded", "workflows", res.Workflows, "added", res.Added, "removed", res.Removed,
					"replaced", res.Replaced)
			}
		}
	}()
}

// asProblems returns err as flowfile.Problems: itself if it is, else one problem at where.
func asProblems(where string, err error) flowfile.Problems {
	var ps flowfile.Problems
	if errors.As(err, &ps) {
		return ps
	}
	return flowfile.Problems{{File: where, Message: err.Error()}}
}
