package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/steps/sqlstep"
)

func newMigrateCommand(g *globals) *cobra.Command {
	var target string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the database or bring its schema up to date",
		Long: `migrate opens the database named by --db, creating the file if it does not exist, applies
every schema migration this build knows that the database lacks, and prints the schema
version. Running it again changes nothing.

With --target VAR it migrates instead the business database whose DSN the environment
variable VAR holds — the one a sql step names with database: VAR — creating the table
onceflow_applied there, in which sql steps record the effect keys they applied in the same
transaction as their statements. Running it again changes nothing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if target != "" {
				db, err := sqlstep.OpenDB(target, os.LookupEnv)
				if err != nil {
					return usagef("--target %s: %v", target, err)
				}
				defer db.Close()
				if err := db.Migrate(ctx); err != nil {
					return err
				}
				outf(g.stdout, "database of %s (%s): table %s is ready\n", target, db.Dialect(), sqlstep.Table)
				return nil
			}
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
			outf(g.stdout, "database %s: schema version %d of %d (%s)\n", loc.URL(), applied, known, status)
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "migrate the business database whose DSN this environment variable holds (for sql steps)")
	return cmd
}
