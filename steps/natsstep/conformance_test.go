package natsstep_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/onceflow/onceflow/steps/natsstep"
	"github.com/onceflow/onceflow/steps/steptest"
)

// The server is the real NATS JetStream; a stream deleted before the publish leaves the
// subject captured by none (permanent). A lost acknowledgement, and a server that fails one
// publish, cannot be had on demand without breaking the client's connection, so the
// unknown and retryable classes are not exercised here (TestUnreachableServerIsRetryable
// covers a server that cannot be reached).
func TestConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		url, name, subject, js := stream(t)
		return steptest.Harness{
			Kind:  natsstep.NewKind(),
			Block: "subject: \"" + subject + ".orders.{input.id}\"\nbody: {order: \"{input.id}\"}\n",
			Env:   map[string]string{natsstep.EnvURL: url},
			Arrange: func(t *testing.T, o steptest.Outcome) bool {
				switch o {
				case steptest.Retryable, steptest.Unknown:
					return false
				case steptest.Permanent:
					if err := js.DeleteStream(context.Background(), name); err != nil {
						t.Fatal(err)
					}
				}
				return true
			},
			Identities: func(t *testing.T) []string {
				ctx := context.Background()
				s, err := js.Stream(ctx, name)
				if err != nil {
					return nil // deleted: it holds nothing
				}
				info, err := s.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
					m, err := s.GetMsg(ctx, seq)
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
				}
				return ids
			},
			Broken: "subject: \"orders.>\"\n",
		}
	})
}
