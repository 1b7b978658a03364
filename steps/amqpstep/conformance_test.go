package amqpstep_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/steps/amqpstep"
	"github.com/onceflow/onceflow/steps/steptest"
)

// The broker is the real RabbitMQ, through a proxy that can lose the confirm on its way
// back (unknown); a queue deleted before the publish makes the message unroutable
// (permanent). A negative confirm cannot be provoked on demand, so the retryable class is
// not exercised.
func TestConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		url, q, ch := queue(t)
		host := strings.TrimSuffix(strings.SplitN(url, "@", 2)[1], "/")
		p := newProxy(t, host)
		t.Cleanup(p.kill)
		var mu sync.Mutex
		loseNext := false
		var ids []string
		kind := amqpstep.NewKind(amqpstep.KindOptions{Hooks: amqpstep.Hooks{BeforePublish: func() {
			mu.Lock()
			defer mu.Unlock()
			p.drop.Store(loseNext)
			loseNext = false
		}}})
		return steptest.Harness{
			Kind:  kind,
			Block: "routing_key: " + q + "\nbody: \"pick {input.id}\"\ntimeout: 1s\n",
			Env:   map[string]string{amqpstep.EnvURL: strings.Replace(url, host, p.ln.Addr().String(), 1)},
			Arrange: func(t *testing.T, o steptest.Outcome) bool {
				switch o {
				case steptest.Retryable:
					return false
				case steptest.Permanent:
					if _, err := ch.QueueDelete(q, false, false, false); err != nil {
						t.Fatal(err)
					}
				case steptest.Unknown:
					mu.Lock()
					loseNext = true
					mu.Unlock()
				default:
					p.drop.Store(false) // the broker answers again
				}
				return true
			},
			Identities: func(t *testing.T) []string {
				for {
					m, ok, err := ch.Get(q, true)
					if err != nil || !ok {
						break
					}
					mu.Lock()
					ids = append(ids, m.MessageId)
					mu.Unlock()
				}
				mu.Lock()
				defer mu.Unlock()
				return append([]string(nil), ids...)
			},
			Broken: "exchange: \"\"\nbody: x\n",
		}
	})
}
