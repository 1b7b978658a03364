package natsstep_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/steps/natsstep"
)

func withInput(key string, in map[string]any) *onceflow.StepContext {
	c := sc(key)
	c.Input, _ = json.Marshal(in)
	return c
}

// A value spliced into a subject is one token: "a.b" added a token (another subject, which
// the stream took), ">" was published to a literal "….>" subject, and "a b", refused by
// the client, was classed an unknown outcome and retried although nothing was sent. Each
// is a permanent error before anything is sent.
func TestSubjectValuesAreOneToken(t *testing.T) {
	url, name, subject, js := stream(t)
	conn := &natsstep.Conn{URL: url}
	t.Cleanup(conn.Close)
	st, err := natsstep.New(natsstep.Spec{Subject: subject + ".pick.{input.sku}", Body: map[string]any{"sku": "{input.sku}"}}, conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, sku := range []string{"A.7", ">", "*", "A*", "A 7", "A\t7", "A\n7", "\x1b[31mA", "A\u00a07"} {
		_, err := st.Do(ctx, withInput("pick:"+testsvc.Suffix(), map[string]any{"sku": sku}))
		var se *onceflow.StepError
		if !errors.As(err, &se) || se.Class != onceflow.Permanent || se.Reason != natsstep.ReasonSubjectInvalid ||
			!strings.Contains(err.Error(), "field {input.sku}") || !strings.Contains(err.Error(), "not one subject token") {
			t.Errorf("sku %q: %v (class %s), want a permanent %s naming the field", sku, err, onceflow.ClassOf(err), natsstep.ReasonSubjectInvalid)
		}
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("the stream holds %d messages from values that are not one token, want none", info.State.Msgs)
	}
	// One token, letters, digits, "-" and non-ASCII letters alike, is published.
	out, err := st.Do(ctx, withInput("pick:"+testsvc.Suffix(), map[string]any{"sku": "Ä-7_b"}))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(ctx, subject+".pick.Ä-7_b")
	if err != nil || msg.Sequence != out.(natsstep.Output).Sequence {
		t.Fatalf("message %v, %v", msg, err)
	}
}

// The subject's own text is checked when the step is compiled.
func TestSubjectTextIsChecked(t *testing.T) {
	for _, subj := range []string{"orders..paid", "orders.>", "orders.*.paid", "orders paid", ".orders", "orders.", "orders.{input.id}..x", "orders.\x00"} {
		if _, err := natsstep.New(natsstep.Spec{Subject: subj, Body: "x"}, nil); err == nil || !strings.Contains(err.Error(), "nats subject") {
			t.Errorf("New(%q) = %v, want the subject refused", subj, err)
		}
	}
	for _, subj := range []string{"orders.paid", "orders.{input.id}", "orders.id-{input.id}.x", "{input.region}.orders"} {
		if _, err := natsstep.New(natsstep.Spec{Subject: subj, Body: "x"}, nil); err != nil {
			t.Errorf("New(%q) = %v", subj, err)
		}
	}
}

// A message the client refuses before sending it (larger than the server takes) is a
// permanent error, not an unknown outcome: nothing was sent.
func TestMessageRefusedBeforeSendingIsPermanent(t *testing.T) {
	url, name, subject, js := stream(t)
	conn := &natsstep.Conn{URL: url}
	t.Cleanup(conn.Close)
	st, err := natsstep.New(natsstep.Spec{Subject: subject + ".big", Body: "{input.blob}"}, conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = st.Do(ctx, withInput("big:"+testsvc.Suffix(), map[string]any{"blob": strings.Repeat("x", 8<<20)}))
	if onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("%v (class %s), want a permanent error saying nothing was sent", err, onceflow.ClassOf(err))
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("stream info %v, %v", info, err)
	}
}

// A step compiled without a connection only checks its spec: run, it refuses for good
// with what to fix, and publishes nothing.
func TestStepWithoutConnRefusesToRun(t *testing.T) {
	st, err := natsstep.New(natsstep.Spec{Subject: "orders.paid", Body: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Do(context.Background(), sc("k"))
	if onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "no connection") {
		t.Fatalf("Do without a connection = %v (%s), want a permanent error naming the missing connection", err, onceflow.ClassOf(err))
	}
}
