package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newMigrateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create the database or bring its schema up to date",
		Long: `migrate opens the database named by --db, creating the file if it does not exist, applies
every schema migration this build knows that the database lacks, and prints the schema
version. Running it again changes nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			s, loc, err := g.openStore(ctx, false)
			if err != nil {
				return err
			}
			defer s.Close()
			applied, known, err := s.SchemaVersion(ctx)
			if err != nil {
				return err
			}
			status := "up to date"
			if applied > known {
				status = fmt.Sprintf("newer than this build, which knows up to version %d; upgrade onceflow", known)
			}
			fmt.Fprintf(g.stdout, "database %s: schema version %d of %d (%s)\n", loc.URL(), applied, known, status)
			return nil
		},
	}
}
