package queue

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// fuzzMaxMessage is the message limit of the fuzzed trigger: small, so that the fuzzer
// reaches messages above it.
const fuzzMaxMessage = 512

// fuzzTrigger is a trigger of the orders workflow (entity and run key from the payload's
// order_id, else the Event-Id header, order_id required) and its companion, on a SQLite
// file of its own.
func fuzzTrigger(f *testing.F) (*Handler, *onceflow.Client, store.Store) {
	f.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(f.TempDir(), "onceflow.db"), sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		f.Fatal(err)
	}
	h, err := NewHandler(Config{Workflow: "orders", Source: "nats:ORDERS/fuzz", RunKey: "{headers.Event-Id}", MaxMessageBytes: fuzzMaxMessage}, "nats")
	if err != nil {
		f.Fatal(err)
	}
	orders := onceflow.Workflow{Name: "orders", Entity: "order:{input.order_id}", RequiredInput: []string{"order_id"}, Steps: []onceflow.Step{
		{ID: "note", EffectKey: "note:{run.key}", Do: func(context.Context, *onceflow.StepContext) (any, error) { return map[string]any{}, nil }},
	}}
	for _, w := range []onceflow.Workflow{orders, h.Companion(c)} {
		if err := c.Register(w); err != nil {
			f.Fatal(err)
		}
	}
	return h, c, st
}

// newRuns returns the runs stored after the run after (0: all), by workflow, and the
// newest run's ID.
func newRuns(t *testing.T, st store.Store, after int64) (map[string][]*store.Run, int64) {
	t.Helper()
	runs, err := st.RunList(context.Background(), store.RunListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	out, newest := map[string][]*store.Run{}, after
	for _, r := range runs {
		if r.ID > after {
			out[r.Workflow] = append(out[r.Workflow], r)
		}
		newest = max(newest, r.ID)
	}
	return out, newest
}

// parseHeaders reads "Name: value" lines.
func parseHeaders(s string) map[string]string {
	h := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h[k] = strings.TrimPrefix(v, " ")
		}
	}
	return h
}

// FuzzHandle hands any payload, headers and message id to a trigger and checks the
// decision: never a panic or an error (the store is healthy), a run started or found, or
// the message kept for review — never both, also once the review item's step has tried
// the message again — and what is kept is bounded by the limit, whatever the message.
func FuzzHandle(f *testing.F) {
	for _, s := range []struct{ id, headers, payload string }{
		{"", "Event-Id: e1", `{"order_id": 1}`},
		{"m-2", "Event-Id: e2", `{"order_id": "2", "total": 5}`},
		{"", "Event-Id: e1", `{"order_id": 1, "total": 9}`}, // the key again, another payload
		{"", "", `{"order_id": 3}`},                         // no key
		{"", "Event-Id: e4", `{"total": 4}`},                // no order_id
		{"", "Event-Id: e5", "order=5"},
		{"", "Event-Id: e6", "\xff\xfe"},
		{"", "Event-Id: e7", `{"order_id": "a\u0000b"}`},
		{"", "Event-Id: e8", `{"order_id": "a\u202eb"}`},
		{"", "Event-Id: e9", `{"order_id": "` + strings.Repeat("9", 300) + `"}`},
		{"", "Event-Id: e10", `{"order_id": 10, "pad": "` + strings.Repeat("p", fuzzMaxMessage) + `"}`},
		{"", "Event-Id: e11\nX-Pad: " + strings.Repeat("h", fuzzMaxMessage), `{"order_id": 11}`},
		{"", "Event-Id: e12", `{"order_id": 12, "order_id": 13}`},
		{"", "Event-Id: e13", `{"order_id": 13, "x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`},
		{"", "Event-Id: \u200be14", `{"order_id": 14}`},
		{"", "Event-Id: e15", `{"order_id": "\ud800"}`},
		{"", "Event-Id: e16", `[1, 2]`},
		{"", "Event-Id: e17", ``},
	} {
		f.Add(s.id, s.headers, []byte(s.payload))
	}
	trig, c, st := fuzzTrigger(f)
	f.Fuzz(func(t *testing.T, id, headers string, payload []byte) {
		ctx := context.Background()
		m := Message{ID: id, Headers: parseHeaders(headers), Payload: payload}
		_, last := newRuns(t, st, 0)
		out, err := trig.Handle(ctx, c, m)
		if err != nil {
			t.Fatalf("Handle(%q, %q, %q): %v", id, headers, payload, err)
		}
		for {
			n, err := c.Work(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		added, _ := newRuns(t, st, last)
		orders, kept := len(added["orders"]), len(added["orders"+RejectSuffix])
		switch {
		case out == Started && (orders != 1 || kept != 0):
			t.Fatalf("started: %d order runs and %d kept messages added, want one run", orders, kept)
		case out == Duplicate && (orders != 0 || kept != 0):
			t.Fatalf("duplicate: %d order runs and %d kept messages added, want none", orders, kept)
		case out == Rejected && (orders != 0 || kept > 1):
			t.Fatalf("rejected: %d order runs and %d kept messages added, want no run and at most one kept message", orders, kept)
		case out != Started && out != Duplicate && out != Rejected:
			t.Fatalf("outcome %q", out)
		case len(added) > 2 || orders+kept > 1:
			t.Fatalf("%s: added %v", out, added)
		}
		if out == Started && m.Size() > fuzzMaxMessage {
			t.Fatalf("a message of %d bytes started a run; the limit is %d", m.Size(), fuzzMaxMessage)
		}
		if out != Rejected {
			return
		}
		if kept == 0 {
			return // a redelivery of a message kept before
		}
		// What is kept is bounded: the message within the limit, as text (JSON escapes
		// at most six bytes for one) or base64, or only its size and digest above it.
		run, err := st.RunGetByID(ctx, added["orders"+RejectSuffix][0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if bound := 6*(fuzzMaxMessage+maxKeptHeaderBytes) + 4096; len(run.Input) > bound {
			t.Fatalf("a kept message of %d bytes, more than %d", len(run.Input), bound)
		}
		var in map[string]any
		if err := json.Unmarshal(run.Input, &in); err != nil {
			t.Fatal(err)
		}
		if m.Size() > fuzzMaxMessage {
			if _, ok := in["payload"]; ok || in["reason"] != string(ReasonMessageTooLarge) || in["size"] != float64(m.Size()) {
				t.Fatalf("a message of %d bytes kept as %s", m.Size(), run.Input)
			}
		}
	})
}
