package flowfile

import _ "embed"

// schemaDocument is the JSON Schema (2020-12) of a workflow file.
//
//go:embed workflow.schema.json
var schemaDocument []byte

// Schema returns the JSON Schema (draft 2020-12) of a workflow file, for editors that
// complete and check YAML against a schema (`onceflow schema` prints it). Parse accepts
// exactly the fields it lists; Parse checks more than it can express (templates, `when`
// expressions, the steps' graph).
func Schema() []byte { return append([]byte(nil), schemaDocument...) }
