package emailstep_test

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/internal/smtptest"
	"github.com/onceflow/onceflow/steps/emailstep"
	"github.com/onceflow/onceflow/steps/steptest"
)

var messageIDRE = regexp.MustCompile(`(?m)^Message-ID: <([^>]*)>`)

func TestConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		sink := smtptest.New(t)
		policy := &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
		srv := emailstep.Server{Addr: sink.Addr, TLS: emailstep.TLSNone}
		return steptest.Harness{
			Kind:  emailstep.NewKind(emailstep.KindOptions{Server: &srv, Dial: policy.DialContext}),
			Block: "from: \"Acme <hello@acme.example>\"\nto: \"lead-{input.id}@example.com\"\nsubject: Welcome\nbody: \"Hello {input.id}\"\n",
			Arrange: func(_ *testing.T, o steptest.Outcome) bool {
				switch o {
				case steptest.Retryable:
					sink.Reply("451 try again later")
				case steptest.Permanent:
					sink.Reply("554 no such mailbox")
				case steptest.Unknown:
					sink.Reply(smtptest.Drop) // the whole message sent, no final answer
				}
				return true
			},
			Identities: func(*testing.T) []string {
				var ids []string
				for _, m := range sink.Messages() {
					if id := messageIDRE.FindStringSubmatch(strings.ReplaceAll(m.Data, "\r\n", "\n")); id != nil {
						ids = append(ids, id[1])
					} else {
						ids = append(ids, "")
					}
				}
				return ids
			},
			Identity: emailstep.MessageID,
			Broken:   "to: \"{input.email}\"\nsubject: Welcome\n",
		}
	})
}
