package emailstep

import (
	"context"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
)

// A template value is one address: an input field holding "a@x, evil@y" cannot add a
// recipient, unless the step allows lists.
func TestTemplateValueIsOneAddress(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	in := `{"email": "zoe@example.com, evil@example.net", "order": 8812}`
	_, err := newStep(t, simpleSpec(), Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("k1", in))
	if se := stepError(t, err); se.Class != onceflow.Permanent || !strings.Contains(err.Error(), "allow_lists") {
		t.Fatalf("error %v, want permanent", err)
	}
	if n := len(srv.deliveries()); n != 0 {
		t.Fatalf("%d messages sent", n)
	}
	// Fixed addresses beside a field, and a display name, are still one value each.
	spec := simpleSpec()
	spec.To = `"Zoë, customer" <{input.email}>, ops@example.com`
	if _, err := newStep(t, spec, Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("k2", `{"email": "zoe@example.com", "order": 1}`)); err != nil {
		t.Fatal(err)
	}
	allowed := simpleSpec()
	allowed.AllowLists = true
	if _, err := newStep(t, allowed, Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("k3", in)); err != nil {
		t.Fatal(err)
	}
	d := srv.deliveries()
	if len(d) != 2 || len(d[0].rcpt) != 2 || len(d[1].rcpt) != 2 {
		t.Fatalf("deliveries %+v", d)
	}
}
