package cli

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/redact"
)

// maskFlags are the redaction flags of the commands that print stored run data: they read
// it through the client, masked as the API masks it, unless an operator asks for it
// unmasked (which the audit trail records).
type maskFlags struct {
	unmasked  bool
	actor     string
	workflows string
}

func (f *maskFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.unmasked, "unmasked", false, "print secrets and personal data unmasked (recorded in the audit trail with --actor)")
	fl.StringVar(&f.actor, "actor", reviewActor(), "who reads the data, for the audit trail of --unmasked")
	fl.StringVar(&f.workflows, "workflows", "", "workflow files (a file or directory) whose redact: fields and secrets are masked too")
}

// reader is what the command reads through: the client, masked by its policy; with
// --unmasked, as stored, each read recorded in the audit trail as --actor's.
func (f *maskFlags) reader(c *onceflow.Client) onceflow.Reader {
	if f.unmasked {
		return c.Unmasked(f.actor)
	}
	return c
}

// cliRedaction is the redaction policy of the commands that read stored runs: the
// secret-looking field names every policy masks, the fields of ONCEFLOW_REDACT_FIELDS
// and the values of the secret environment variables defs read (each file's redact:
// fields are its workflow's, registered with it).
func cliRedaction(defs []*flowfile.Definition) (onceflow.Redaction, error) {
	var red onceflow.Redaction
	for _, s := range strings.Split(os.Getenv(envRedactFields), ",") {
		if s = strings.TrimSpace(s); s != "" {
			red.Fields = append(red.Fields, s)
		}
	}
	if _, err := redact.New(nil, red.Fields); err != nil {
		return red, usagef("%s: %v", envRedactFields, err)
	}
	for _, d := range defs {
		red.Secrets = append(red.Secrets, d.MaskedValues(os.LookupEnv)...)
	}
	return red, nil
}
