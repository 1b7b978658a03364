package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/triggers"
)

// Settings is a workflow file's webhook: block.
type Settings struct {
	Name   string `yaml:"name"`
	Scheme string `yaml:"scheme"`
	// SecretEnv names the environment variables holding the signing secrets (several for
	// rotation; any one may match).
	SecretEnv []string       `yaml:"secret_env"`
	Tolerance block.Duration `yaml:"tolerance"`
	// EventID derives the run key from the delivery, e.g. "{input.id}" for Stripe; the
	// default is the delivery id header of schemes that have one.
	EventID string `yaml:"event_id"`
	// EventTypes, when set, accepts only deliveries whose EventTypeField is listed; others
	// are acknowledged and ignored.
	EventTypes     []string `yaml:"event_types"`
	EventTypeField string   `yaml:"event_type_field"`
	// Header, Encoding, Prefix and TimestampHeader configure the generic hmac scheme.
	Header          string `yaml:"header"`
	Encoding        string `yaml:"encoding"`
	Prefix          string `yaml:"prefix"`
	TimestampHeader string `yaml:"timestamp_header"`
}

// Config is the receiver's configuration the settings give.
func (s *Settings) Config() Config {
	return Config{Name: s.Name, Scheme: s.Scheme, SecretEnv: s.SecretEnv, Tolerance: time.Duration(s.Tolerance), EventID: s.EventID,
		EventTypes: s.EventTypes, EventTypeField: s.EventTypeField, Header: s.Header, Encoding: s.Encoding, Prefix: s.Prefix,
		TimestampHeader: s.TimestampHeader}
}

var (
	hookNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,99}$`)
	envNameRE  = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
)

// Walk checks the settings and reports the secrets' variables.
func (s *Settings) Walk(w block.Walker) {
	if !hookNameRE.MatchString(s.Name) {
		w.Problem("name", "webhook name %q must be 1-100 lowercase letters, digits, '_' or '-'; it becomes /hooks/NAME", s.Name)
	}
	if _, err := signature.ParseScheme(s.Scheme); err != nil {
		w.Problem("scheme", "%v", err)
	}
	if len(s.SecretEnv) == 0 {
		w.Problem("", "secret_env must name at least one environment variable holding the signing secret")
	}
	for i, e := range s.SecretEnv {
		path := fmt.Sprintf("secret_env[%d]", i)
		if !envNameRE.MatchString(e) {
			w.Problem(path, "%q is not an environment variable name (A-Z, 0-9, _); secrets are never written in workflow files", e)
		}
		w.EnvVar(path, e, block.EnvUse{Label: "secret_env", Secret: true})
	}
	switch {
	case s.EventID != "":
		t, err := keytmpl.Parse(s.EventID)
		if err != nil {
			w.Problem("event_id", "%v", err)
		} else {
			for _, f := range t.Fields() {
				if !strings.HasPrefix(f, "input.") {
					w.Problem("event_id", "{%s}: event_id may read only {input.…}", f)
				}
			}
			if t.Raw() {
				w.Problem("event_id", "{+field} splices a value into a URL as it is; a key is written {field}")
			}
		}
	case s.Scheme == "stripe" || s.Scheme == "hmac":
		w.Problem("", "event_id is required for scheme %s (for Stripe: \"{input.id}\"); it makes a repeated delivery start nothing", s.Scheme)
	case s.Scheme == "github":
		w.Problem("", "event_id is required for scheme github: the X-GitHub-Delivery header is not signed, so the run key must come from the signed payload (such as \"{input.after}\" for push events or \"{input.workflow_run.id}-{input.action}\")")
	}
	if len(s.EventTypes) > 0 && s.EventTypeField == "" {
		s.EventTypeField = "type"
	}
	if s.Scheme == "hmac" && s.Header == "" {
		w.Problem("", "header is required for scheme hmac: the request header that carries the signature")
	}
}

// UniqueName is the webhook's name: two files may not serve the same path.
func (s *Settings) UniqueName() (string, string) { return s.Name, "name" }

// Build builds the receiver, reading its secrets from the environment.
func (s *Settings) Build(b *triggers.Build) (triggers.Trigger, error) {
	return New(b.Workflow, s.Config(), b.Env)
}

var (
	_ triggers.Config = (*Settings)(nil)
	_ triggers.Unique = (*Settings)(nil)
)

// kind is the webhook trigger kind.
type kind struct{}

// Kind returns the trigger kind of a workflow file's webhook: block, which package
// stdtriggers registers.
func Kind() triggers.Kind { return kind{} }

func (kind) Spec() triggers.Spec {
	return triggers.Spec{Block: "webhook", Trigger: onceflow.TriggerWebhook,
		Summary: "Starts a run for each signed delivery a provider posts to /hooks/NAME.",
		Doc: "The signature is verified with the secrets of secret_env (Stripe, Standard Webhooks, GitHub or a generic hmac), " +
			"the event types not listed are acknowledged and ignored, and the run key is the provider's event id, so that a " +
			"repeated delivery starts nothing.",
		Schema: json.RawMessage(settingsSchema), Settings: reflect.TypeFor[Settings](), Unique: "webhook %q is also defined in %s"}
}

func (kind) Decode(s block.Settings, _ string) (triggers.Config, error) {
	c := &Settings{}
	if err := s.Decode(c); err != nil {
		return nil, err
	}
	return c, nil
}
