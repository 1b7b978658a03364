package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/flowfile"
)

func newValidateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check workflow files and report every problem as file:line:col",
		Long: `validate reads workflow YAML files and reports every problem it finds — syntax, unknown
fields, bad templates, unknown step kinds, needs that name no step, cycles, webhook
settings — one per line as file:line:col: message. It exits 0 when every file is valid.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s needs at least one FILE", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			defs, err := flowfile.LoadFiles(args...)
			var ps flowfile.Problems
			if errors.As(err, &ps) {
				for _, p := range ps {
					fmt.Fprintln(g.stdout, p.String())
				}
				return fmt.Errorf("%d problem(s) in %d file(s)", len(ps), len(args))
			}
			if err != nil {
				return err
			}
			for _, d := range defs {
				fmt.Fprintf(g.stdout, "%s: workflow %q is valid (%d steps)\n", d.File(), d.Name, len(d.Steps))
			}
			return nil
		},
	}
}
