package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/steps/slackstep"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// slackSink is a counting Slack incoming-webhook endpoint.
type slackSink struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	msgs     []slackMsg // accepted messages
	// status, when set, decides the answer to request n (from 1); 0 accepts.
	status func(n int) int
}

type slackMsg struct {
	Text   string           `json:"text"`
	Blocks []map[string]any `json:"blocks"`
	Key    string           `json:"-"`
}

func newSlackSink(t *testing.T) *slackSink {
	t.Helper()
	s := &slackSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests++
		n, status := s.requests, s.status
		s.mu.Unlock()
		if status != nil {
			if code := status(n); code != 0 {
				http.Error(w, "unavailable", code)
				return
			}
		}
		var m slackMsg
		if err := json.Unmarshal(body, &m); err != nil || m.Text == "" || len(m.Blocks) == 0 {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		m.Key = r.Header.Get("Idempotency-Key")
		s.mu.Lock()
		s.msgs = append(s.msgs, m)
		s.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *slackSink) onRequest(f func(n int) int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = f
}

func (s *slackSink) messages() []slackMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]slackMsg(nil), s.msgs...)
}

func (s *slackSink) count() (requests, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, len(s.msgs)
}

// slackChannel is a channel posting to sink, its URL read from the environment.
func slackChannel(t *testing.T, name string, sink *slackSink) onceflow.NotifyChannel {
	t.Helper()
	settings, err := block.FromYAML(`webhook: "{env.SLACK_URL}"`)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := slackstep.NewKind(slackstep.KindOptions{Client: sink.Client()}).AlertChannel(settings)
	if err != nil {
		t.Fatal(err)
	}
	send, err := ch.Config.Build(&steps.Build{Env: func(n string) (string, bool) {
		if n == "SLACK_URL" {
			return sink.URL, true
		}
		return "", false
	}})
	if err != nil {
		t.Fatal(err)
	}
	return onceflow.NotifyChannel{Name: name, Send: send, Retry: onceflow.RetryPolicy{MaxAttempts: 8}, OnUnknown: ch.Config.OnUnknown()}
}

const opsChannel = "onceflow.notify-slack.ops"

// notifyOps sends every review item to one Slack channel.
func notifyOps(sink *slackSink, t *testing.T) func(*onceflow.Config) {
	return func(c *onceflow.Config) {
		c.Notify = onceflow.NotifyConfig{
			Policies: []onceflow.NotifyPolicy{{Name: "ops", Channels: []string{opsChannel}}},
			Channels: []onceflow.NotifyChannel{slackChannel(t, opsChannel, sink)},
		}
	}
}

type leadInput struct {
	ID       string `json:"id"`
	WhatsApp string `json:"whatsapp,omitempty"`
	CRM      string `json:"crm,omitempty"`
}

// leadWorkflow refuses the WhatsApp notice for good when the input says "refuse", and
// gives up on a CRM that is "down" after one attempt.
func leadWorkflow() onceflow.Workflow {
	decode := func(sc *onceflow.StepContext) leadInput {
		var in leadInput
		_ = sc.DecodeInput(&in)
		return in
	}
	return onceflow.Workflow{Name: "website-lead", Entity: "lead:{input.id}", Steps: []onceflow.Step{
		{ID: "whatsapp_notice", Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			if decode(sc).WhatsApp == "refuse" {
				return nil, onceflow.PermanentError(errors.New("WhatsApp refused the number <+49 170 000>"))
			}
			return map[string]any{"sent": true}, nil
		}},
		{ID: "crm", Retry: onceflow.RetryPolicy{MaxAttempts: 1}, Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			if decode(sc).CRM == "down" {
				return nil, errors.New("CRM answered 503")
			}
			return map[string]any{"id": 1}, nil
		}},
	}}
}

// fail starts n runs from lead web-<from> whose steps fail as in says, and works them.
func (b *bundle) fail(t *testing.T, from, n int, in leadInput) {
	t.Helper()
	for i := from; i < from+n; i++ {
		in.ID = fmt.Sprintf("web-%d", i)
		b.start(t, "website-lead", in.ID, in)
	}
	b.work(t)
}

func (b *bundle) notify(t *testing.T) onceflow.NotifyResult {
	t.Helper()
	res, err := b.client.Notify(b.ctx)
	if err != nil {
		t.Fatalf("Notify: %v", err)
	}
	return res
}

func (b *bundle) incidents(t *testing.T) []*store.Incident {
	t.Helper()
	list, err := b.store.IncidentList(b.ctx, store.IncidentListParams{})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func notifySetup(t *testing.T, mod ...func(*onceflow.Config)) (*bundle, *slackSink) {
	t.Helper()
	sink := newSlackSink(t)
	b := setup(t, append([]func(*onceflow.Config){notifyOps(sink, t)}, mod...)...)
	b.register(t, leadWorkflow())
	return b, sink
}

// Fifty review items of one kind, arriving over fifty minutes while the notifier runs,
// make exactly one alert at the first and one digest of the other 49 when the window ends.
func TestNotifyOneAlertAndOneDigest(t *testing.T) {
	b, sink := notifySetup(t)
	b.clock.Advance(62 * time.Minute) // 10:02
	first := b.clock.Now()
	b.fail(t, 1000, 1, leadInput{WhatsApp: "refuse"})
	if res := b.notify(t); res.Events != 1 || res.Opened != 1 || res.Alerts != 1 {
		t.Fatalf("first Notify = %+v, want 1 event, 1 incident, 1 alert", res)
	}
	b.work(t)
	if _, n := sink.count(); n != 1 {
		t.Fatalf("%d messages after the first failure, want 1", n)
	}
	for batch := range 7 {
		b.clock.Advance(7 * time.Minute)
		b.fail(t, 1001+7*batch, 7, leadInput{WhatsApp: "refuse"})
		if res := b.notify(t); res.Events != 7 || res.Opened+res.Alerts+res.Digests != 0 {
			t.Fatalf("Notify after batch %d = %+v, want 7 events counted and nothing sent", batch, res)
		}
		b.work(t)
	}
	if _, n := sink.count(); n != 1 {
		t.Fatalf("%d messages after 50 failures within the window, want 1", n)
	}
	b.clock.Set(first.Add(time.Hour - time.Second))
	if res := b.notify(t); res.Digests != 0 {
		t.Fatalf("a digest before the window ended: %+v", res)
	}
	b.clock.Set(first.Add(time.Hour))
	if res := b.notify(t); res.Digests != 1 || res.Closed != 1 {
		t.Fatalf("Notify when the window ended = %+v, want 1 digest and 1 incident closed", res)
	}
	b.work(t)
	b.clock.Advance(3 * time.Hour)
	for range 3 {
		b.notify(t)
		b.work(t)
	}

	msgs := sink.messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want exactly 1 alert and 1 digest", len(msgs))
	}
	alert, digest := msgs[0], msgs[1]
	for _, want := range []string{"website-lead/whatsapp_notice (permanent_error) needs review", "run 1 lead:web-1000", "2026-03-01 10:02 UTC",
		"WhatsApp refused the number"} {
		if !strings.Contains(alert.Text, want) {
			t.Errorf("alert text %q does not contain %q", alert.Text, want)
		}
	}
	// The examples are the first five repeats (of the first batch, worked concurrently).
	wantDigest := "49 more needs_review of website-lead/whatsapp_notice (permanent_error) since 2026-03-01 10:02 UTC; examples: run "
	if !strings.HasPrefix(digest.Text, wantDigest) || !strings.HasSuffix(digest.Text, ", …") || strings.Count(digest.Text, " lead:web-100") != 5 {
		t.Errorf("digest text = %q, want it to start %q and list 5 examples of the first repeats", digest.Text, wantDigest)
	}
	if blocks := fmt.Sprint(alert.Blocks); !strings.Contains(blocks, "type:section") || !strings.Contains(blocks, "&lt;+49 170 000&gt;") ||
		!strings.Contains(blocks, "repeats within 1h go into one digest") {
		t.Errorf("alert blocks %s: want Slack sections with mrkdwn escaped", blocks)
	}
	if alert.Key != opsChannel+".send:incident:1" || digest.Key != opsChannel+".send:incident:1:digest" {
		t.Errorf("Idempotency-Keys %q and %q, want the channel's effect keys of the incident", alert.Key, digest.Key)
	}

	// The messages are runs of the channel's workflow, started by the notifier and audited.
	runs, err := b.store.RunList(b.ctx, store.RunListParams{Workflow: opsChannel})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].State != store.StateCompleted || runs[1].RunKey != "incident:1" || runs[1].Entity != "incident:1" {
		t.Fatalf("channel runs = %d (%+v), want the alert and the digest, completed", len(runs), runs[0])
	}
	created := b.only(t, b.events(t, store.EventListParams{RunID: runs[1].ID}), store.EventRunCreated)
	if created.Actor != store.ActorNotifier {
		t.Errorf("alert run created by %q, want %q", created.Actor, store.ActorNotifier)
	}
	incs := b.incidents(t)
	if len(incs) != 1 || incs[0].Count != 50 || incs[0].ClosedAt.IsZero() {
		t.Fatalf("incidents = %d, want 1 closed with 50 events", len(incs))
	}
	lead := b.events(t, store.EventListParams{Entity: "lead:web-1000"})
	if opened := b.only(t, lead, store.EventIncidentOpened); opened.StepName != "whatsapp_notice" || opened.Reason != store.ReasonPermanentError {
		t.Errorf("incident.opened event %+v", opened)
	}
}

func (b *bundle) only(t *testing.T, evs []*store.Event, typ store.EventType) *store.Event {
	t.Helper()
	var found *store.Event
	for _, e := range evs {
		if e.Type == typ {
			if found != nil {
				t.Fatalf("two %s events", typ)
			}
			found = e
		}
	}
	if found == nil {
		t.Fatalf("no %s event among %q", typ, eventTypes(evs, ""))
	}
	return found
}

// Review items of another step, another reason or another workflow are other incidents,
// each alerted once; a policy's filters decide which channels hear about which.
func TestNotifyKindsAreSeparateIncidents(t *testing.T) {
	team := newSlackSink(t)
	b, ops := notifySetup(t, func(c *onceflow.Config) {
		c.Notify.Policies = append(c.Notify.Policies, onceflow.NotifyPolicy{Name: "whatsapp-team", Workflow: "website-lead",
			Steps: []string{"whatsapp_notice"}, Reasons: []store.Reason{store.ReasonPermanentError}, Window: 10 * time.Minute, Channels: []string{"team"}})
		c.Notify.Channels = append(c.Notify.Channels, slackChannel(t, "team", team))
	})
	b.register(t, onceflow.Workflow{Name: "payment", Steps: []onceflow.Step{{ID: "invoice", Do: func(context.Context, *onceflow.StepContext) (any, error) {
		return nil, onceflow.PermanentError(errors.New("customer unknown"))
	}}}})
	b.fail(t, 1, 3, leadInput{WhatsApp: "refuse"})
	b.fail(t, 10, 2, leadInput{CRM: "down"})
	b.fail(t, 20, 1, leadInput{WhatsApp: "refuse", CRM: "down"})
	b.start(t, "payment", "evt_1", nil)
	b.work(t)
	if res := b.notify(t); res.Events != 8 || res.Opened != 4 || res.Alerts != 4 {
		t.Fatalf("Notify = %+v, want 8 events opening 4 incidents: 3 of ops, 1 of whatsapp-team", res)
	}
	b.work(t)
	texts := func(s *slackSink) []string {
		var out []string
		for _, m := range s.messages() {
			out = append(out, m.Text)
		}
		slices.Sort(out) // steps run concurrently, and so do the alerts
		return out
	}
	got := texts(ops)
	if len(got) != 3 || !strings.HasPrefix(got[0], "payment/invoice (permanent_error)") ||
		!strings.HasPrefix(got[1], "website-lead/crm (attempts_exhausted)") || !strings.HasPrefix(got[2], "website-lead/whatsapp_notice (permanent_error)") {
		t.Fatalf("ops alerts = %q", got)
	}
	if got := texts(team); len(got) != 1 || !strings.Contains(got[0], "whatsapp_notice") {
		t.Fatalf("team alerts = %q, want the WhatsApp refusals only", got)
	}

	// The team's window is 10 minutes: its digest comes first, and a refusal after it
	// opens a new incident with an alert of its own.
	b.clock.Advance(10 * time.Minute)
	b.fail(t, 30, 1, leadInput{WhatsApp: "refuse"})
	if res := b.notify(t); res.Opened != 1 || res.Alerts != 1 || res.Digests != 1 {
		t.Fatalf("Notify after the team's window = %+v, want its digest and a new incident", res)
	}
	b.clock.Advance(time.Hour)
	if res := b.notify(t); res.Digests != 2 || res.Closed != 4 {
		t.Fatalf("Notify after every window = %+v, want 2 digests (ops whatsapp, ops crm) and 4 incidents closed", res)
	}
	b.work(t)
	if got := texts(team); len(got) != 3 || !strings.HasPrefix(got[0], "3 more needs_review of website-lead/whatsapp_notice") ||
		!strings.Contains(got[1]+got[2], "at 2026-03-01 09:00 UTC.") || !strings.Contains(got[1]+got[2], "lead:web-30 at 2026-03-01 09:10") {
		t.Errorf("team messages = %q, want a digest of 3 and two alerts, the second about web-30", got)
	}
	if got := texts(ops); len(got) != 5 || !strings.HasPrefix(got[0], "2 more needs_review of website-lead/crm (attempts_exhausted)") ||
		!strings.HasPrefix(got[1], "4 more needs_review of website-lead/whatsapp_notice") {
		t.Errorf("ops messages = %q, want 3 alerts and digests of 4 and 2", got)
	}
}

// A channel whose endpoint answers 503 is retried with the same effect key, every attempt
// recorded, until it succeeds: still one alert.
func TestNotifyChannelRetriedUntilItSucceeds(t *testing.T) {
	b, sink := notifySetup(t)
	sink.onRequest(func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	b.fail(t, 1, 1, leadInput{WhatsApp: "refuse"})
	b.notify(t)
	b.work(t)
	for range 2 {
		b.clock.Advance(10 * time.Minute)
		b.notify(t)
		b.work(t)
	}
	requests, accepted := sink.count()
	if requests != 3 || accepted != 1 {
		t.Fatalf("endpoint saw %d requests and accepted %d, want 3 and 1", requests, accepted)
	}
	runs, err := b.store.RunList(b.ctx, store.RunListParams{Workflow: opsChannel})
	if err != nil || len(runs) != 1 || runs[0].State != store.StateCompleted {
		t.Fatalf("channel runs = %d (%v), want 1 completed", len(runs), err)
	}
	atts, err := b.store.AttemptListByRun(b.ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []int
	for _, a := range atts {
		statuses = append(statuses, a.ResponseStatus)
		if a.EffectKey != opsChannel+".send:incident:1" {
			t.Errorf("attempt %d under key %q", a.Number, a.EffectKey)
		}
	}
	if fmt.Sprint(statuses) != "[503 503 200]" {
		t.Errorf("attempt statuses = %v, want [503 503 200]", statuses)
	}
	evs := b.events(t, store.EventListParams{RunID: runs[0].ID})
	if n := len(eventTypesOf(evs, store.EventStepRetryPlanned)); n != 2 {
		t.Errorf("%d step.retry_scheduled events for the alert, want 2", n)
	}
}

func eventTypesOf(evs []*store.Event, typ store.EventType) []*store.Event {
	var out []*store.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// A channel that gives up waits for review like any step, and is not alerted about:
// the notifier never notifies about itself.
func TestNotifyChannelReviewDoesNotNotify(t *testing.T) {
	b, sink := notifySetup(t)
	sink.onRequest(func(int) int { return http.StatusNotFound }) // a deleted webhook
	b.fail(t, 1, 2, leadInput{WhatsApp: "refuse"})
	for range 3 {
		b.notify(t)
		b.work(t)
		b.clock.Advance(time.Hour)
	}
	runs, err := b.store.RunList(b.ctx, store.RunListParams{Workflow: opsChannel})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].State != store.StateNeedsReview || runs[1].State != store.StateNeedsReview {
		t.Fatalf("channel runs = %d, want the alert and the digest, both waiting for review", len(runs))
	}
	incs := b.incidents(t)
	if len(incs) != 1 || incs[0].Workflow != "website-lead" {
		t.Fatalf("incidents = %d (first of %s), want only the website-lead one", len(incs), incs[0].Workflow)
	}
	if requests, _ := sink.count(); requests != 2 {
		t.Errorf("endpoint saw %d requests, want 2 (a 404 is not retried)", requests)
	}
}

// Two processes notifying at the same time over one database announce each incident
// once: the cursor decides who records the events, the run keys who starts the messages.
func TestNotifyTwoClientsDoNotDoubleAlert(t *testing.T) {
	b, sink := notifySetup(t)
	other, err := sqlite.Open(b.ctx, b.path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	c2, err := onceflow.New(onceflow.Config{Store: other, WorkerID: "second", Clock: b.clock.Now, ClockSync: -1, Rand: func() float64 { return 0.5 },
		Notify: onceflow.NotifyConfig{
			Policies: []onceflow.NotifyPolicy{{Name: "ops", Channels: []string{opsChannel}}},
			Channels: []onceflow.NotifyChannel{slackChannel(t, opsChannel, sink)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Register(leadWorkflow()); err != nil {
		t.Fatal(err)
	}
	clients := []*onceflow.Client{b.client, c2}
	race := func() {
		var wg sync.WaitGroup
		for _, c := range clients {
			for range 3 {
				wg.Go(func() {
					if _, err := c.Notify(b.ctx); err != nil {
						t.Errorf("Notify: %v", err)
					}
				})
			}
			wg.Go(func() {
				if _, err := c.Work(b.ctx); err != nil {
					t.Errorf("Work: %v", err)
				}
			})
		}
		wg.Wait()
		for _, c := range clients {
			if _, err := c.Work(b.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 4 {
		b.fail(t, 10*i, 10, leadInput{WhatsApp: "refuse"})
		race()
		b.clock.Advance(10 * time.Minute)
	}
	b.clock.Advance(time.Hour)
	race()
	race()
	if _, n := sink.count(); n != 2 {
		t.Fatalf("%d messages from two notifying processes, want 1 alert and 1 digest", n)
	}
	if msgs := sink.messages(); !strings.HasPrefix(msgs[1].Text, "39 more needs_review") {
		t.Errorf("digest = %q, want 39 repeats", msgs[1].Text)
	}
}

// Under Serve, the notifier runs by itself on the process that leads it.
func TestNotifyUnderServe(t *testing.T) {
	b, sink := notifySetup(t, func(c *onceflow.Config) {
		c.PollInterval = 20 * time.Millisecond
		c.Notify.Interval = 20 * time.Millisecond
	})
	b.fail(t, 1, 20, leadInput{WhatsApp: "refuse"})
	stop := serve(t, b.client)
	waitFor(t, "the alert", func() bool { _, n := sink.count(); return n == 1 })
	b.clock.Advance(time.Hour)
	waitFor(t, "the digest", func() bool { _, n := sink.count(); return n == 2 })
	waitFor(t, "the incident to close", func() bool {
		incs := b.incidents(t)
		return len(incs) == 1 && !incs[0].ClosedAt.IsZero()
	})
	stop()
	if _, n := sink.count(); n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
	if msgs := sink.messages(); !strings.HasPrefix(msgs[1].Text, "19 more needs_review") {
		t.Errorf("digest = %q", msgs[1].Text)
	}
}

// A database the notifier has never read starts with the last window: older review items
// are not announced.
func TestNotifyFirstPassSkipsOldReviews(t *testing.T) {
	b, sink := notifySetup(t)
	b.fail(t, 1, 3, leadInput{WhatsApp: "refuse"})
	b.clock.Advance(2 * time.Hour)
	b.fail(t, 10, 1, leadInput{CRM: "down"})
	if res := b.notify(t); res.Events != 4 || res.Opened != 1 {
		t.Fatalf("first Notify = %+v, want 4 events read and 1 incident (the recent one)", res)
	}
	b.work(t)
	if msgs := sink.messages(); len(msgs) != 1 || !strings.Contains(msgs[0].Text, "website-lead/crm") {
		t.Fatalf("messages = %v, want the CRM alert only", msgs)
	}
}

func TestNotifyConfigErrors(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	send := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	for _, tc := range []struct {
		n    onceflow.NotifyConfig
		want string
	}{
		{onceflow.NotifyConfig{Policies: []onceflow.NotifyPolicy{{Name: "ops", Channels: []string{"slack"}}}}, `names channel "slack", which is not among`},
		{onceflow.NotifyConfig{Policies: []onceflow.NotifyPolicy{{Name: "ops"}}}, "names no channel"},
		{onceflow.NotifyConfig{Policies: []onceflow.NotifyPolicy{{Name: "", Channels: []string{"c"}}}, Channels: []onceflow.NotifyChannel{{Name: "c", Send: send}}}, "Name"},
		{onceflow.NotifyConfig{Policies: []onceflow.NotifyPolicy{{Name: "a", Channels: []string{"c"}}, {Name: "a", Channels: []string{"c"}}},
			Channels: []onceflow.NotifyChannel{{Name: "c", Send: send}}}, `policy "a" is defined twice`},
		{onceflow.NotifyConfig{Channels: []onceflow.NotifyChannel{{Name: "c"}}}, "no Send function"},
		{onceflow.NotifyConfig{Channels: []onceflow.NotifyChannel{{Name: "c", Send: send}, {Name: "c", Send: send}}}, `channel "c" is defined twice`},
		{onceflow.NotifyConfig{Channels: []onceflow.NotifyChannel{{Name: "bad name", Send: send}}}, `channel "bad name"`},
	} {
		_, err := onceflow.New(onceflow.Config{Store: st, Notify: tc.n})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %+v: %v, want an error containing %q", tc.n, err, tc.want)
		}
	}
}
