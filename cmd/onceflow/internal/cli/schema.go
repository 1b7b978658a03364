package cli

import (
	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/flowfile"
)

func newSchemaCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of workflow files, for editors",
		Long: `schema prints the JSON Schema (draft 2020-12) of workflow files, with the step kinds this
binary knows (flowfile/workflow.schema.json for the standard ones). Save it and point your
editor's YAML support at it, for completion and checks as you type, e.g. with the YAML
language server a first line of:

  # yaml-language-server: $schema=./workflow.schema.json

onceflow validate checks more than the schema can: templates, when expressions and the
steps' graph.`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			doc, err := flowfile.Schema(fileReader().Kinds, fileReader().Triggers)
			if err != nil {
				return err
			}
			_, err = g.stdout.Write(doc)
			return err
		},
	}
}
