package triggers

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
)

// Kind is a trigger a workflow file sets up with a block of its own at the top of the
// file (webhook:, queue:, schedule:). Package flowfile hands the block to Decode, reports
// what the Config's Walk finds, and builds the trigger with Build; a program registers the
// kinds its files may use in a Registry (package stdtriggers holds the standard ones).
type Kind interface {
	// Spec describes the kind: its block, its documentation, its schema.
	Spec() Spec
	// Decode decodes the block, which sits in the file of workflow, strictly
	// (block.Settings.Decode): its error is a decoding error, which stops the file. What
	// the settings mean is checked by the Config's Walk.
	Decode(s block.Settings, workflow string) (Config, error)
}

// Spec describes a trigger kind.
type Spec struct {
	// Block is the file's top-level field that holds the kind's settings, such as
	// "queue".
	Block string
	// Trigger is what feeds a workflow that sets the block, for its access rule
	// (onceflow.Access.Trigger): a workflow a trigger feeds is closed to API tokens unless
	// its file opens it.
	Trigger onceflow.Trigger
	// Summary is one line; Doc paragraphs, for the reference.
	Summary, Doc string
	// Description, when set, describes the block's field at the top of the file's
	// schema.
	Description string
	// ConnectionHint says where the block's connection settings come from, added to the
	// refusal of a connection setting written in a file (url:, dsn:, password:).
	ConnectionHint string
	// Schema is the block's JSON Schema, the definition #/$defs/BLOCK of the workflow
	// file's schema; it may refer to the file's shared definitions (template, duration,
	// retry).
	Schema json.RawMessage
	// Settings is the type Decode decodes the block into (a struct with yaml tags): the
	// schema's tests check that Schema lists exactly its fields.
	Settings reflect.Type
	// Unique, when set, is the problem of two files whose blocks give the same
	// UniqueName: a format with the name (%q) and the other file (%s), such as "webhook %q
	// is also defined in %s".
	Unique string
}

// Config is a decoded block: the kind's settings for one workflow.
type Config interface {
	// Walk checks the settings, reporting problems at paths relative to the block, and
	// the environment variables it names directly (EnvVar: a secret's or a broker URL's
	// variable). It does no I/O.
	Walk(w block.Walker)
	// Build makes the trigger. An error is a mistake in the settings that Walk could not
	// see (or a missing setting Build.Consume needs); a trigger that cannot work for
	// want of something outside the file — a secret that is not set — is built and says
	// so on its Err.
	Build(b *Build) (Trigger, error)
}

// Unique is a Config whose name must be unique across the files a program loads (a
// webhook's path, a schedule's name): UniqueName returns it and the path, relative to the
// block, that a duplicate's problem points at.
type Unique interface {
	UniqueName() (name, path string)
}

// Build is what building a trigger may use.
type Build struct {
	// Workflow is the workflow the trigger starts; File the file it was read from.
	Workflow, File string
	// Env looks up the environment: secrets, broker URLs, {env.NAME} of requests.
	Env func(string) (string, bool)
	// HTTPClient makes the requests of triggers that make any (a schedule's for_each
	// list), enforcing the egress policy; nil builds them as an outline whose requests
	// fail (a program that only lists or fires schedules).
	HTTPClient *http.Client
	// Consume says the trigger will run: a consumer whose broker URL is not set is then
	// an error. Without it a consumer is built for its companion workflows alone.
	Consume bool
	// MaxDepth caps how deeply an item's JSON may nest (default: the API's).
	MaxDepth int
	// Logger and Metrics receive what the triggers log and measure (nil: nothing).
	Logger  *slog.Logger
	Metrics Metrics
}

// Metrics receives what triggers measure; labels are workflow names and outcomes only.
// Package metrics implements it.
type Metrics interface {
	// QueueConnected says whether the workflow's consumer is connected.
	QueueConnected(workflow, broker string, up bool)
	// QueueMessage counts a handled message: outcome is started, duplicate or rejected.
	QueueMessage(workflow, outcome string)
}
