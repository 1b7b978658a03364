package sqlstep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
)

// KindOptions configure the sql kind.
type KindOptions struct {
	// Hooks are given to every step of the kind: signals for tests.
	Hooks Hooks
}

// Kind is the sql step kind, `kind: sql` with a `sql:` block: one connection pool per
// database variable, opened on first use and closed by Close.
type Kind struct {
	mu    sync.Mutex
	dbs   map[string]*DB
	hooks Hooks
}

// NewKind returns the sql kind.
func NewKind(o KindOptions) *Kind { return &Kind{dbs: map[string]*DB{}, hooks: o.Hooks} }

var (
	_ steps.Kind           = (*Kind)(nil)
	_ steps.TargetMigrator = (*Kind)(nil)
)

// Spec describes the kind.
func (k *Kind) Spec() steps.Spec {
	return steps.Spec{
		Name:    "sql",
		Summary: "Runs statements on a business database in one transaction that also records the effect key.",
		Doc: `database names the environment variable holding the DSN of a PostgreSQL or
MySQL/MariaDB database (never the DSN itself). The statements of one attempt run in one
transaction, which also inserts the effect key and the result into the table
onceflow_applied of that database (created by onceflow migrate --target VAR), so the
statements and the key commit together or not at all; a retry after a crash finds the key
and completes the step from it, applying nothing twice. Statement text is never a
template: values from the run are bind parameters ($1 or ?), listed as args. Statements
that would end the transaction (BEGIN, COMMIT, DDL that MySQL commits implicitly) are
refused when the file is loaded.

A statement may expect a number of rows (expect_rows); another count rolls the attempt back
and ends the step skipped, or waits for review (on_mismatch: needs_review). Rows a
statement returns become the step's output.`,
		Example: `- id: mark_paid
  kind: sql
  effect_key: "order-paid:{input.order_id}"
  sql:
    database: SHOP_DB
    statements:
      - query: "UPDATE orders SET status = 'paid' WHERE id = $1 AND status = 'pending'"
        args: ["{input.order_id}"]
        expect_rows: 1
`,
		Schema: json.RawMessage(`{
			"type": "object",
			"required": [
				"database",
				"statements"
			],
			"additionalProperties": false,
			"properties": {
				"database": {
					"type": "string",
					"pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
					"description": "The environment variable holding the DSN, never the DSN."
				},
				"statements": {
					"type": "array",
					"minItems": 1,
					"items": {
						"type": "object",
						"required": [
							"query"
						],
						"additionalProperties": false,
						"properties": {
							"query": {
								"type": "string",
								"minLength": 1,
								"description": "SQL with bind parameters ($1 or ?); never a template."
							},
							"args": {
								"type": "array",
								"items": {
									"$ref": "#/$defs/template"
								}
							},
							"expect_rows": {
								"type": "integer",
								"minimum": 0
							}
						}
					}
				},
				"on_mismatch": {
					"enum": [
						"skip",
						"needs_review"
					]
				},
				"timeout": {
					"$ref": "#/$defs/duration"
				}
			}
		}`),
		Settings:       reflect.TypeFor[Settings](),
		ConnectionHint: "a sql step's DSN from the variable its database names",
	}
}

// Decode decodes a sql block.
func (k *Kind) Decode(s block.Settings) (steps.Config, error) {
	c := &Settings{kind: k}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Settings are a sql step's settings, its `sql:` block: statements on the business's own
// database, applied once per effect key.
type Settings struct {
	// Database names the environment variable holding the DSN (never the DSN itself).
	Database   string              `yaml:"database"`
	Statements []StatementSettings `yaml:"statements"`
	// OnMismatch is what a statement whose expect_rows does not match does: skip (default)
	// or needs_review. Nothing of the step is applied either way.
	OnMismatch string         `yaml:"on_mismatch"`
	Timeout    block.Duration `yaml:"timeout"`

	kind *Kind
}

// StatementSettings is one statement: SQL text with bind parameters, never a template.
type StatementSettings struct {
	Query string `yaml:"query"`
	// Args are templates for the bind parameters, in order.
	Args []string `yaml:"args"`
	// ExpectRows, when set, is how many rows the statement must change (or return).
	ExpectRows *int `yaml:"expect_rows"`
}

// Spec is the step the settings describe.
func (s *Settings) Spec() Spec {
	spec := Spec{Database: s.Database, Review: s.OnMismatch == "needs_review", Timeout: time.Duration(s.Timeout)}
	for _, st := range s.Statements {
		spec.Statements = append(spec.Statements, Statement{Query: st.Query, Args: st.Args, ExpectRows: st.ExpectRows})
	}
	return spec
}

var envNameRE = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// Walk checks the database variable, each statement's text and the arguments.
func (s *Settings) Walk(w block.Walker) {
	if !envNameRE.MatchString(s.Database) {
		w.Problem("database", "database must name the environment variable holding the DSN (A-Z, 0-9, _), such as SHOP_DB; the DSN itself never goes in the file")
	} else {
		// The DSN holds the database's password: its value is masked whole, and a
		// program serving the file refuses to start without it.
		w.EnvVar("database", s.Database, block.EnvUse{Label: "database's DSN", Secret: true, Required: true})
	}
	if len(s.Statements) == 0 {
		w.Problem("", "sql needs statements")
	}
	clean := true
	for j, st := range s.Statements {
		if err := CheckStatement(st.Query); err != nil {
			clean = false
			w.Problem(fmt.Sprintf("statements[%d].query", j), "%v", err)
		}
		if st.ExpectRows != nil && *st.ExpectRows < 0 {
			w.Problem(fmt.Sprintf("statements[%d].expect_rows", j), "expect_rows must be 0 or more")
		}
	}
	switch s.OnMismatch {
	case "", "skip", "needs_review":
	default:
		w.Problem("on_mismatch", "on_mismatch %q is not skip or needs_review", s.OnMismatch)
	}
	if clean && len(s.Statements) > 0 {
		if _, err := New(s.Spec(), nil); err != nil {
			w.Problem("", "%v", err)
			return
		}
		// The arguments compiled, so they read nothing but the run's data.
		for j, st := range s.Statements {
			for k, a := range st.Args {
				w.Template(fmt.Sprintf("statements[%d].args[%d]", j, k), a, block.Use{Label: fmt.Sprintf("statement %d arg %d", j+1, k+1)})
			}
		}
	}
}

// OnUnknown leaves an unknown outcome to the engine: the retry finds the key the
// committed attempt wrote, and repeats nothing.
func (s *Settings) OnUnknown() onceflow.UnknownAction { return "" }

// Build compiles the statements against the database the step's variable names.
func (s *Settings) Build(b *steps.Build) (onceflow.StepFunc, error) {
	if s.kind == nil {
		return nil, errors.New("sql steps are not available here")
	}
	db, err := s.kind.db(s.Database, b.Env)
	if err != nil {
		return nil, err
	}
	st, err := New(s.Spec(), db)
	if err != nil {
		return nil, err
	}
	st.Hooks = s.kind.hooks
	return st.Do, nil
}

// db returns the pool of the database variable name, preparing it on first use.
func (k *Kind) db(name string, env func(string) (string, bool)) (*DB, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if db, ok := k.dbs[name]; ok {
		return db, nil
	}
	db, err := OpenDB(name, env)
	if err != nil {
		return nil, err
	}
	k.dbs[name] = db
	return db, nil
}

// Close closes the connection pools the kind's steps opened.
func (k *Kind) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for name, db := range k.dbs {
		errs = append(errs, db.Close())
		delete(k.dbs, name)
	}
	return errors.Join(errs...)
}

// MigrateTarget creates the table onceflow_applied in the database whose DSN the
// environment variable name holds, and names its dialect.
func (k *Kind) MigrateTarget(ctx context.Context, env func(string) (string, bool), name string) (string, error) {
	db, err := OpenDB(name, env)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		return "", err
	}
	return db.Dialect(), nil
}
