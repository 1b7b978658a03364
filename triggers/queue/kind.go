package queue

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/triggers"
)

// Broker is a message broker a workflow file's queue: block may name, by a block of its
// own inside it (nats:, amqp:). A broker package (natsqueue, amqpqueue) provides one; a
// Kafka broker would be one package and one line in stdtriggers.
type Broker interface {
	// Name is the broker's block inside queue:, such as "nats", and the label of its
	// metrics.
	Name() string
	// Needs says what its block needs, for the message of a queue block that names no
	// broker: "(stream, consumer)".
	Needs() string
	// DefaultURLEnv is the environment variable its URL is read from without url_env.
	DefaultURLEnv() string
	// Schema is the JSON Schema of its block.
	Schema() json.RawMessage
	// NewSettings returns fresh settings to decode its block into: a pointer to a struct.
	NewSettings() BrokerSettings
}

// BrokerSettings is a broker's block of one queue.
type BrokerSettings interface {
	// Walk checks the block, at paths relative to it.
	Walk(w block.Walker)
	// Consumer builds the consumer of the queue, whose broker is at url.
	NewConsumer(cfg Config, url string) (triggers.Consumer, error)
}

// Settings is a workflow file's queue: block.
type Settings struct {
	// Brokers holds the broker blocks the queue sets, by broker name (one, when the file
	// is valid).
	Brokers map[string]BrokerSettings `yaml:"-"`
	// URLEnv names the environment variable holding the broker's URL (default the
	// broker's, such as ONCEFLOW_NATS_URL).
	URLEnv string `yaml:"url_env"`
	// RunKey derives the run key from the message; the default is the message id.
	RunKey string `yaml:"run_key"`
	// MaxBacklog pauses consumption while more steps than this are due and not yet done
	// (default 10000).
	MaxBacklog int `yaml:"max_backlog"`
	// MaxMessageBytes is the longest message, payload and headers, that starts a run
	// (default 1048576).
	MaxMessageBytes int `yaml:"max_message_bytes"`

	brokers []Broker
}

// Broker returns the queue's broker and its block: the first set, in the kind's order.
func (s *Settings) Broker() (Broker, BrokerSettings, bool) {
	for _, b := range s.brokers {
		if bs, ok := s.Brokers[b.Name()]; ok {
			return b, bs, true
		}
	}
	return nil, nil, false
}

// URLVariable is the environment variable the queue reads its broker's URL from.
func (s *Settings) URLVariable() string {
	if s.URLEnv != "" {
		return s.URLEnv
	}
	if b, _, ok := s.Broker(); ok {
		return b.DefaultURLEnv()
	}
	return ""
}

var (
	envNameRE      = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	queueRunKeyRE2 = runKeyFieldRE
)

// prefixed walks a broker's block inside the queue's.
type prefixed struct {
	w    block.Walker
	base string
}

func (p prefixed) Problem(path, format string, args ...any) {
	p.w.Problem(block.Join(p.base, path), format, args...)
}
func (p prefixed) Template(path, src string, use block.Use) {
	p.w.Template(block.Join(p.base, path), src, use)
}
func (p prefixed) EnvVar(path, name string, use block.EnvUse) {
	p.w.EnvVar(block.Join(p.base, path), name, use)
}

// Walk checks the block: one broker, its own block's settings, the URL's variable, the
// bounds and the run key's template.
func (s *Settings) Walk(w block.Walker) {
	var names, needs []string
	set := 0
	for _, b := range s.brokers {
		names = append(names, b.Name())
		needs = append(needs, "a "+b.Name()+" block "+b.Needs())
		if _, ok := s.Brokers[b.Name()]; ok {
			set++
		}
	}
	switch {
	case set == 0:
		w.Problem("", "queue needs %s", list(needs, "or"))
	case set > 1:
		w.Problem("", "queue takes one of %s, not both", list(names, "and"))
	}
	for _, b := range s.brokers {
		if bs, ok := s.Brokers[b.Name()]; ok {
			bs.Walk(prefixed{w, b.Name()})
		}
	}
	if s.URLEnv != "" {
		if !envNameRE.MatchString(s.URLEnv) {
			w.Problem("url_env", "%q is not an environment variable name (A-Z, 0-9, _); connection settings are never written in workflow files", s.URLEnv)
		}
		w.EnvVar("url_env", s.URLEnv, block.EnvUse{Label: "url_env"})
	}
	if s.MaxBacklog < 0 {
		w.Problem("max_backlog", "max_backlog must be positive")
	}
	if s.MaxMessageBytes < 0 {
		w.Problem("max_message_bytes", "max_message_bytes must be positive (a number of bytes, such as 1048576)")
	}
	if s.RunKey != "" {
		t, err := keytmpl.Parse(s.RunKey)
		if err != nil {
			w.Problem("run_key", "%v", err)
		} else {
			for _, f := range t.Fields() {
				if !queueRunKeyRE2.MatchString(f) {
					w.Problem("run_key", "{%s}: a queue's run_key reads {headers.NAME}, {message.id} and {input.…} (the JSON payload)", f)
				}
			}
		}
	}
}

// list joins words as "a, b and c".
func list(words []string, and string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + and + " " + words[len(words)-1]
}

// Build builds the queue's consumer, its broker's URL read from the environment; with
// b.Consume a URL that is not set is an error.
func (s *Settings) Build(b *triggers.Build) (triggers.Trigger, error) {
	_, bs, ok := s.Broker()
	if !ok {
		return nil, errors.New("queue: no broker block")
	}
	name := s.URLVariable()
	url := ""
	if b.Env != nil {
		url, _ = b.Env(name)
	}
	if b.Consume && strings.TrimSpace(url) == "" {
		return nil, fmt.Errorf("workflow %s consumes a queue: set %s to the broker's URL", b.Workflow, name)
	}
	cfg := Config{Workflow: b.Workflow, URLEnv: name, RunKey: s.RunKey, MaxBacklog: s.MaxBacklog, MaxDepth: b.MaxDepth,
		MaxMessageBytes: s.MaxMessageBytes, Logger: b.Logger, Metrics: b.Metrics}
	t, err := bs.NewConsumer(cfg, url)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	return t, nil
}

var _ triggers.Config = (*Settings)(nil)

// kind is the queue trigger kind over its brokers.
type kind struct{ brokers []Broker }

// Kind returns the trigger kind of a workflow file's queue: block, whose broker blocks
// are those of brokers, in this order (package stdtriggers gives natsqueue's and
// amqpqueue's).
func Kind(brokers ...Broker) triggers.Kind { return &kind{brokers: brokers} }

func (k *kind) Spec() triggers.Spec {
	return triggers.Spec{Block: "queue", Trigger: onceflow.TriggerQueue,
		Summary:     "Starts a run for each message of a broker's queue, acknowledged once the run is stored.",
		Description: "Starts a run for each message of a NATS JetStream stream or a RabbitMQ queue; the broker's URL comes from the environment.",
		Doc: "A message that cannot start a run is kept for review as a run of the companion workflow NAME.rejected; the " +
			"broker's URL comes from the environment (url_env), never the file.",
		Schema: k.schema(), Settings: k.wireType(), ConnectionHint: k.connectionHint()}
}

func (k *kind) connectionHint() string {
	var vars []string
	for _, b := range k.brokers {
		vars = append(vars, b.DefaultURLEnv())
	}
	return "a queue's broker URL from " + list(vars, "or") + ", or the variable its url_env names"
}

// schema is the block's JSON Schema: its own fields and one block per broker, exactly one
// of which is required.
func (k *kind) schema() json.RawMessage {
	props := map[string]any{}
	var oneOf []any
	for _, b := range k.brokers {
		var v any
		if err := json.Unmarshal(b.Schema(), &v); err != nil {
			v = map[string]any{}
		}
		props[b.Name()] = v
		oneOf = append(oneOf, map[string]any{"required": []any{b.Name()}})
	}
	var own map[string]any
	_ = json.Unmarshal([]byte(ownSchema), &own)
	for name, v := range own {
		props[name] = v
	}
	raw, _ := json.Marshal(map[string]any{"type": "object", "additionalProperties": false, "oneOf": oneOf, "properties": props})
	return raw
}

// ownSchema is the schema of the queue block's own fields.
const ownSchema = `{
  "url_env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
    "description": "The variable holding the broker's URL (default ONCEFLOW_NATS_URL or ONCEFLOW_AMQP_URL)."},
  "run_key": {"type": "string", "description": "{headers.NAME}, {input.…} or {message.id} (the default)."},
  "max_backlog": {"type": "integer", "minimum": 1, "description": "Consuming pauses while more steps than this are due (default 10000)."},
  "max_message_bytes": {"type": "integer", "minimum": 1,
    "description": "The longest message, payload and headers, that starts a run (default 1048576); a longer one is kept for review with its size and digest."}
}`

// wireType is what the block is decoded into: a field per broker, then the queue's own.
func (k *kind) wireType() reflect.Type {
	var fields []reflect.StructField
	for i, b := range k.brokers {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Broker%d", i), Type: reflect.TypeOf(b.NewSettings()),
			Tag: reflect.StructTag(fmt.Sprintf(`yaml:%q`, b.Name()))})
	}
	own := reflect.TypeFor[Settings]()
	for i := range own.NumField() {
		f := own.Field(i)
		if f.IsExported() && f.Tag.Get("yaml") != "-" {
			fields = append(fields, f)
		}
	}
	return reflect.StructOf(fields)
}

// Decode decodes the block: the broker blocks, each into its broker's settings, and the
// queue's own fields, strictly.
func (k *kind) Decode(s block.Settings, _ string) (triggers.Config, error) {
	wire := reflect.New(k.wireType())
	if err := s.Decode(wire.Interface()); err != nil {
		return nil, err
	}
	w := wire.Elem()
	out := &Settings{Brokers: map[string]BrokerSettings{}, brokers: k.brokers}
	for i, b := range k.brokers {
		if v := w.Field(i); !v.IsNil() {
			out.Brokers[b.Name()] = v.Interface().(BrokerSettings)
		}
	}
	ov := reflect.ValueOf(out).Elem()
	for i := len(k.brokers); i < w.NumField(); i++ {
		ov.FieldByName(w.Type().Field(i).Name).Set(w.Field(i))
	}
	return out, nil
}
