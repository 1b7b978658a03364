package steps

import (
	"context"
	"encoding/json"
	"reflect"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
)

// Kind is a step kind: what `kind: NAME` in a workflow file means. A Kind holds what its
// steps share — an HTTP client, a connection pool, a server's address — and is safe for
// use by concurrent goroutines; a file is decoded, checked and built against it as often
// as it is read (each reload).
type Kind interface {
	// Spec describes the kind: its name, the step field holding its settings, its
	// documentation and schema.
	Spec() Spec
	// Decode decodes a step's settings, the value of its Spec.Block field, strictly (with
	// block.Settings.Decode). Its error is a decoding error, returned as Decode gave it:
	// it stops the file with one problem at the value's line and column. What the
	// settings mean is checked by the Config's Walk. A nil Config with a nil error says
	// the block sets nothing, as if it were absent.
	Decode(s block.Settings) (Config, error)
}

// Config is one step's decoded settings, bound to the kind they came from.
type Config interface {
	// Walk checks the settings and reports what it finds to w: every problem, every
	// template it will render and every environment variable it names. It does no I/O
	// and never sees the rest of the file; what templates may read is checked by w.
	Walk(w block.Walker)
	// OnUnknown is what the step does by default when an attempt's outcome is unknown
	// (onceflow.Step.OnUnknown) and the file says nothing: "" leaves it to the engine
	// (retry under the same key), onceflow.ReviewUnknown parks the step for a person —
	// the right default where the destination cannot deduplicate.
	OnUnknown() onceflow.UnknownAction
	// Build returns the step's function. Connections are opened on first use, not here:
	// a file is built to be checked, and on every reload.
	Build(b *Build) (onceflow.StepFunc, error)
}

// Spec describes a kind.
type Spec struct {
	// Name is what `kind:` says: lowercase letters, digits and '-'.
	Name string
	// Block is the step field that holds the settings (default Name).
	Block string
	// Summary is one line; Doc paragraphs of plain text (outcomes, how the destination
	// deduplicates, defaults); Example a step of this kind, in YAML.
	Summary, Doc, Example string
	// Schema is the JSON Schema of the block. It may refer to the shared definitions
	// #/$defs/template, #/$defs/duration and #/$defs/retry, and to Defs.
	Schema json.RawMessage
	// Defs are helper definitions the Schema refers to as #/$defs/NAME.X: their names
	// start with the kind's Name and a dot.
	Defs map[string]json.RawMessage
	// Settings is the type Decode fills (a struct with yaml tags).
	Settings reflect.Type
	// Limits says the kind's steps accept a limits: block of their own (the requests
	// of an http step).
	Limits bool
	// ConnectionHint says where the kind's connection settings come from, for the
	// refusal of a field such as url, dsn or password in a file: "a sql step's DSN from
	// the variable its database names".
	ConnectionHint string
}

// BlockName is the step field holding the kind's settings.
func (s Spec) BlockName() string {
	if s.Block != "" {
		return s.Block
	}
	return s.Name
}

// Build is what a step is built with, besides its settings.
type Build struct {
	// Workflow and Step name the step.
	Workflow, Step string
	// Fields lists the paths of personal data in the run's input and outputs ("email",
	// "customer.name"), masked in what the step stores of a response.
	Fields []string
	// Limiter bounds the requests a step sends to each destination, when the kind
	// takes limits; LimitKeys are the step's own limits.
	Limiter   Limiter
	LimitKeys []string
	// Env looks up {env.NAME}; never nil.
	Env func(name string) (string, bool)
	// Retry is the step's retry policy, as the engine applies it: a kind that honours a
	// destination's Retry-After honours at most Retry.MaxRetryAfter of it.
	Retry onceflow.RetryPolicy
}

// Limiter bounds requests to destinations: the limits of a workflow file's limits:, shared
// by every step of every workflow a process runs, and a step's own.
type Limiter interface {
	// Acquire waits until a request may start under every limit of keys; release ends it.
	Acquire(ctx context.Context, keys ...string) (release func(), err error)
	// Slow holds every request under keys back for d (a 429's Retry-After).
	Slow(ctx context.Context, d time.Duration, keys ...string) error
	// HostKeys returns the keys of the limits declared for a host:port.
	HostKeys(hostport string) []string
}

// TargetMigrator is a Kind whose destinations need tables of onceflow's own before its
// steps run (the sql kind's onceflow_applied): `onceflow migrate --target NAME` creates
// them in the destination the environment variable name holds, and says what it migrated.
type TargetMigrator interface {
	MigrateTarget(ctx context.Context, env func(string) (string, bool), name string) (string, error)
}
