package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/flowfile"
)

func newValidateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check workflow files and report every problem as file:line:col",
		Long: `validate reads workflow YAML files and reports every problem it finds — syntax, unknown
fields, bad templates, unknown step kinds, needs that name no step, cycles, webhook
settings, what templates read — one per line as file:line:col: message, every problem of
every file at once. A DIR stands for its *.yaml and *.yml files. It runs the checks serve
and worker run when they start (except that it does not look at the environment), and
exits 0 when every file is valid.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s needs at least one FILE or DIR", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			defs, err := fileReader().Load(args...)
			var ps flowfile.Problems
			if errors.As(err, &ps) {
				files := map[string]bool{}
				for _, p := range ps {
					outln(g.stdout, p.String())
					files[p.File] = true
				}
				return fmt.Errorf("%d problem(s) in %d file(s)", len(ps), len(files))
			}
			if err != nil {
				return err
			}
			for _, d := range defs {
				outf(g.stdout, "%s: workflow %q is valid (%d steps)\n", d.File(), d.Name, len(d.Steps))
			}
			return nil
		},
	}
}
