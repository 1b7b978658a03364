package natsstep_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/testsvc"
	"github.com/onceflow/onceflow/steps/natsstep"
)

// stream creates a stream of its own on the real server, deleted when the test ends.
func stream(t *testing.T) (url, name, subject string, js jetstream.JetStream) {
	t.Helper()
	url = testsvc.NATS(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := testsvc.Suffix()
	name, subject = "WAREHOUSE_"+strings.ToUpper(s), "warehouse."+s
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject + ".>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return url, name, subject, js
}

func sc(key string) *onceflow.StepContext {
	return &onceflow.StepContext{RunID: 3, RunKey: "evt", Workflow: "order-events", Step: "warehouse", EffectKey: key, Attempt: 1,
		Input: json.RawMessage(`{"order_id": 1001, "sku": "A-7"}`)}
}

// A retried publish under the same effect key leaves one message in the stream: the
// server's duplicate window drops the repeat and the step treats that as success.
func TestRetriedPublishStoresOneMessage(t *testing.T) {
	url, name, subject, js := stream(t)
	conn := &natsstep.Conn{URL: url}
	t.Cleanup(conn.Close)
	st, err := natsstep.New(natsstep.Spec{Subject: subject + ".pick.{input.order_id}", Headers: map[string]string{"Order": "{input.order_id}"},
		Body: map[string]any{"order_id": "{input.order_id}", "sku": "{input.sku}"}}, conn)
	if err != nil {
		t.Fatal(err)
	}
	key := "warehouse-pick:1001:" + testsvc.Suffix()
	ctx := context.Background()
	var outs []natsstep.Output
	for range 3 {
		out, err := st.Do(ctx, sc(key))
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out.(natsstep.Output))
	}
	if outs[0].Duplicate || !outs[1].Duplicate || !outs[2].Duplicate || outs[1].Sequence != outs[0].Sequence || outs[0].MsgID != key {
		t.Fatalf("outputs %+v: want one stored message, then duplicates of it", outs)
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("the stream holds %d messages, want 1", info.State.Msgs)
	}
	msg, err := s.GetLastMsgForSubject(ctx, subject+".pick.1001")
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(jetstream.MsgIDHeader) != key || msg.Header.Get("Order") != "1001" || string(msg.Data) != `{"order_id":1001,"sku":"A-7"}` {
		t.Fatalf("message %v %s", msg.Header, msg.Data)
	}
	// Another key is another message; the attempt records the subject, headers and body.
	c := sc(key + "-b")
	if out, err := st.Do(ctx, c); err != nil || out.(natsstep.Output).Duplicate {
		t.Fatalf("%v %v", out, err)
	}
	if sent := c.RecordedRequest(); sent == nil || sent.Method != "PUBLISH" || sent.URL != "nats:"+subject+".pick.1001" ||
		sent.Headers[jetstream.MsgIDHeader][0] != key+"-b" || sent.Headers["Order"][0] != "1001" || sent.Body != `{"order_id":1001,"sku":"A-7"}` {
		t.Fatalf("recorded request %+v", sent)
	}
}

func TestSubjectWithoutStreamIsPermanent(t *testing.T) {
	url, _, _, _ := stream(t)
	conn := &natsstep.Conn{URL: url}
	t.Cleanup(conn.Close)
	st, err := natsstep.New(natsstep.Spec{Subject: "nowhere." + testsvc.Suffix(), Body: "x"}, conn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Do(context.Background(), sc("k-"+testsvc.Suffix()))
	var se *onceflow.StepError
	if !errors.As(err, &se) || se.Class != onceflow.Permanent || !strings.Contains(err.Error(), "no JetStream stream captures subject") {
		t.Fatalf("%v, want a permanent error naming the missing stream", err)
	}
}

func TestUnreachableServerIsRetryable(t *testing.T) {
	conn := &natsstep.Conn{URL: "nats://127.0.0.1:1"}
	st, err := natsstep.New(natsstep.Spec{Subject: "a.b", Body: "x"}, conn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Do(context.Background(), sc("k"))
	if err == nil || onceflow.ClassOf(err) != onceflow.Retryable || !strings.Contains(err.Error(), natsstep.EnvURL) {
		t.Fatalf("%v (%s), want retryable naming %s", err, onceflow.ClassOf(err), natsstep.EnvURL)
	}
}
