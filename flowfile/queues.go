package flowfile

import (
	"regexp"

	"github.com/onceflow/onceflow/internal/keytmpl"
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
