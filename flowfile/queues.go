package flowfile

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/amqpstep"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/internal/natsstep"
	"github.com/onceflow/onceflow/internal/sqlstep"
)

// QueueDef starts a run for each message of a broker's queue: a NATS JetStream durable pull
// consumer, or a RabbitMQ queue consumed with manual acknowledgements. Exactly one of NATS
// and AMQP is set. Connection settings come from the environment (URLEnv), never the file.
type QueueDef struct {
	NATS *QueueNATSDef `yaml:"nats"`
	AMQP *QueueAMQPDef `yaml:"amqp"`
	// URLEnv names the environment variable holding the broker's URL (default
	// ONCEFLOW_NATS_URL or ONCEFLOW_AMQP_URL).
	URLEnv string `yaml:"url_env"`
	// RunKey derives the run key from the message, e.g. "{headers.X-Event-Id}" or
	// "{input.event_id}" (the JSON payload is the input); the default is the message id
	// (Nats-Msg-Id, AMQP message_id).
	RunKey string `yaml:"run_key"`
	// MaxBacklog pauses consumption while more steps than this are due and not yet done
	// (default 10000).
	MaxBacklog int `yaml:"max_backlog"`
	// MaxMessageBytes is the longest message, payload and headers, that starts a run
	// (default 1048576, the API's body limit); a longer one is kept for review with its
	// size and digest instead of its body.
	MaxMessageBytes int `yaml:"max_message_bytes"`
}

// QueueNATSDef names a JetStream stream and the durable consumer onceflow pulls with.
type QueueNATSDef struct {
	Stream string `yaml:"stream"`
	// Consumer is the durable consumer's name (default onceflow-WORKFLOW); it is created
	// with explicit acknowledgements if it does not exist.
	Consumer string `yaml:"consumer"`
	// Subject filters the stream's subjects (default: all).
	Subject string `yaml:"subject"`
	// AckWait is how long a message may stay unacknowledged before redelivery (default 30s).
	AckWait Duration `yaml:"ack_wait"`
}

// QueueAMQPDef names a RabbitMQ queue (which must exist).
type QueueAMQPDef struct {
	Queue string `yaml:"queue"`
	// Prefetch is how many unacknowledged messages the broker hands out at once (default 50).
	Prefetch int `yaml:"prefetch"`
}

// SQLDef configures a sql step: statements on the business's own database, applied once
// per effect key (see the README's "Databases" section).
type SQLDef struct {
	// Database names the environment variable holding the DSN (never the DSN itself).
	Database   string         `yaml:"database"`
	Statements []SQLStatement `yaml:"statements"`
	// OnMismatch is what a statement whose expect_rows does not match does: skip (default)
	// or needs_review. Nothing of the step is applied either way.
	OnMismatch string   `yaml:"on_mismatch"`
	Timeout    Duration `yaml:"timeout"`
}

// SQLStatement is one statement: SQL text with bind parameters, never a template.
type SQLStatement struct {
	Query string `yaml:"query"`
	// Args are templates for the bind parameters, in order.
	Args []string `yaml:"args"`
	// ExpectRows, when set, is how many rows the statement must change (or return).
	ExpectRows *int `yaml:"expect_rows"`
}

// NATSDef configures a nats step: a message published to JetStream with Nats-Msg-Id set
// to the effect key.
type NATSDef struct {
	Subject string            `yaml:"subject"`
	Headers map[string]string `yaml:"headers"`
	Body    any               `yaml:"body"`
	Timeout Duration          `yaml:"timeout"`
}

// AMQPDef configures an amqp step: a message published with publisher confirms and
// message_id set to the effect key. Consumers must deduplicate by message_id.
type AMQPDef struct {
	Exchange   string            `yaml:"exchange"`
	RoutingKey string            `yaml:"routing_key"`
	Headers    map[string]string `yaml:"headers"`
	Body       any               `yaml:"body"`
	Timeout    Duration          `yaml:"timeout"`
}

var queueRunKeyRE = regexp.MustCompile(`^(input\..+|headers\.[^.]+|message\.id)$`)

func (d *Definition) checkQueue() Problems {
	var ps Problems
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	q := d.Queue
	switch {
	case q.NATS == nil && q.AMQP == nil:
		add("$.queue", "queue needs a nats block (stream, consumer) or an amqp block (queue)")
	case q.NATS != nil && q.AMQP != nil:
		add("$.queue", "queue takes one of nats and amqp, not both")
	}
	if q.NATS != nil && q.NATS.Stream == "" {
		add("$.queue.nats", "nats.stream is required: the JetStream stream to consume")
	}
	if q.AMQP != nil {
		if q.AMQP.Queue == "" {
			add("$.queue.amqp", "amqp.queue is required: the RabbitMQ queue to consume")
		}
		if q.AMQP.Prefetch < 0 {
			add("$.queue.amqp.prefetch", "prefetch must be positive")
		}
	}
	if q.URLEnv != "" && !envNameRE.MatchString(q.URLEnv) {
		add("$.queue.url_env", "%q is not an environment variable name (A-Z, 0-9, _); connection settings are never written in workflow files", q.URLEnv)
	}
	if q.MaxBacklog < 0 {
		add("$.queue.max_backlog", "max_backlog must be positive")
	}
	if q.MaxMessageBytes < 0 {
		add("$.queue.max_message_bytes", "max_message_bytes must be positive (a number of bytes, such as 1048576)")
	}
	if q.RunKey != "" {
		t, err := keytmpl.Parse(q.RunKey)
		if err != nil {
			add("$.queue.run_key", "%v", err)
		} else {
			for _, f := range t.Fields() {
				if !queueRunKeyRE.MatchString(f) {
					add("$.queue.run_key", "{%s}: a queue's run_key reads {headers.NAME}, {message.id} and {input.…} (the JSON payload)", f)
				}
			}
		}
	}
	return ps
}

// checkBrokerStep checks the blocks of sql, nats and amqp steps.
func (d *Definition) checkBrokerStep(i int, s StepDef) Problems {
	var ps Problems
	at := func(field string) string { return fmt.Sprintf("$.steps[%d].%s", i, field) }
	add := func(path, format string, args ...any) { ps = append(ps, d.problemAt(path, format, args...)) }
	if q := s.SQL; q != nil {
		if !envNameRE.MatchString(q.Database) {
			add(at("sql.database"), "step %q: database must name the environment variable holding the DSN (A-Z, 0-9, _), such as SHOP_DB; the DSN itself never goes in the file", s.ID)
		}
		if len(q.Statements) == 0 {
			add(at("sql"), "step %q: sql needs statements", s.ID)
		}
		clean := true
		for j, st := range q.Statements {
			if err := sqlstep.CheckStatement(st.Query); err != nil {
				clean = false
				add(at(fmt.Sprintf("sql.statements[%d].query", j)), "step %q: %v", s.ID, err)
			}
			if st.ExpectRows != nil && *st.ExpectRows < 0 {
				add(at(fmt.Sprintf("sql.statements[%d].expect_rows", j)), "step %q: expect_rows must be 0 or more", s.ID)
			}
		}
		switch q.OnMismatch {
		case "", "skip", "needs_review":
		default:
			add(at("sql.on_mismatch"), "step %q: on_mismatch %q is not skip or needs_review", s.ID, q.OnMismatch)
		}
		if clean && len(q.Statements) > 0 {
			if _, err := sqlstep.New(sqlSpec(q), nil); err != nil {
				add(at("sql"), "step %q: %v", s.ID, err)
			}
		}
	}
	if n := s.NATS; n != nil {
		if _, err := natsstep.New(natsSpec(n), nil); err != nil {
			add(at("nats"), "step %q: %v", s.ID, err)
		}
	}
	if a := s.AMQP; a != nil {
		if _, err := amqpstep.New(amqpSpec(a), nil); err != nil {
			add(at("amqp"), "step %q: %v", s.ID, err)
		}
	}
	return ps
}

func sqlSpec(q *SQLDef) sqlstep.Spec {
	spec := sqlstep.Spec{Database: q.Database, Review: q.OnMismatch == "needs_review", Timeout: time.Duration(q.Timeout)}
	for _, st := range q.Statements {
		spec.Statements = append(spec.Statements, sqlstep.Statement{Query: st.Query, Args: st.Args, ExpectRows: st.ExpectRows})
	}
	return spec
}

func natsSpec(n *NATSDef) natsstep.Spec {
	return natsstep.Spec{Subject: n.Subject, Headers: n.Headers, Body: n.Body, Timeout: time.Duration(n.Timeout)}
}

func amqpSpec(a *AMQPDef) amqpstep.Spec {
	return amqpstep.Spec{Exchange: a.Exchange, RoutingKey: a.RoutingKey, Headers: a.Headers, Body: a.Body, Timeout: time.Duration(a.Timeout)}
}

func (deps Deps) brokerStepFunc(s StepDef) (onceflow.StepFunc, error) {
	switch s.Kind {
	case KindSQL:
		if deps.SQL == nil {
			return nil, errors.New("sql steps are not available here")
		}
		return deps.SQL(s.SQL)
	case KindNATS:
		if deps.NATS == nil {
			return nil, fmt.Errorf("nats steps need a NATS server; set %s", natsstep.EnvURL)
		}
		return deps.NATS(s.NATS)
	case KindAMQP:
		if deps.AMQP == nil {
			return nil, fmt.Errorf("amqp steps need a broker; set %s", amqpstep.EnvURL)
		}
		return deps.AMQP(s.AMQP)
	}
	return nil, fmt.Errorf("kind %q is not sql, nats or amqp", s.Kind)
}

// Close closes the database pools and broker connections the sql, nats and amqp steps of
// StandardDeps opened. Steps built from deps must not run afterwards.
func (deps Deps) Close() {
	if deps.closers == nil {
		return
	}
	deps.closers.mu.Lock()
	defer deps.closers.mu.Unlock()
	for _, c := range deps.closers.fns {
		c()
	}
	deps.closers.fns = nil
}

// closers are what Deps.Close closes; Deps values share them.
type closers struct {
	mu  sync.Mutex
	fns []func()
}

func (c *closers) add(f func()) {
	c.mu.Lock()
	c.fns = append(c.fns, f)
	c.mu.Unlock()
}

// brokerDeps adds the sql, nats and amqp builders to deps: one connection pool per
// database variable, one connection per broker, each made on first use.
func brokerDeps(deps *Deps, env func(string) (string, bool)) {
	deps.closers = &closers{}
	cl := deps.closers
	dbs := map[string]*sqlstep.DB{}
	deps.SQL = func(def *SQLDef) (onceflow.StepFunc, error) {
		db, ok := dbs[def.Database]
		if !ok {
			var err error
			if db, err = sqlstep.OpenDB(def.Database, env); err != nil {
				return nil, err
			}
			dbs[def.Database] = db
			cl.add(func() { _ = db.Close() })
		}
		st, err := sqlstep.New(sqlSpec(def), db)
		if err != nil {
			return nil, err
		}
		return st.Do, nil
	}
	if url, ok := env(natsstep.EnvURL); ok && strings.TrimSpace(url) != "" {
		conn := &natsstep.Conn{URL: url}
		cl.add(conn.Close)
		deps.NATS = func(def *NATSDef) (onceflow.StepFunc, error) {
			st, err := natsstep.New(natsSpec(def), conn)
			if err != nil {
				return nil, err
			}
			return st.Do, nil
		}
	}
	if url, ok := env(amqpstep.EnvURL); ok && strings.TrimSpace(url) != "" {
		conn := &amqpstep.Conn{URL: url}
		cl.add(conn.Close)
		deps.AMQP = func(def *AMQPDef) (onceflow.StepFunc, error) {
			st, err := amqpstep.New(amqpSpec(def), conn)
			if err != nil {
				return nil, err
			}
			return st.Do, nil
		}
	}
}
