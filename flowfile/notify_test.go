package flowfile

import (
	"bufio"
	"context"
	"errors"
	"github.com/onceflow/onceflow/internal/smtptest"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store/sqlite"
)

const notifyYAML = `name: website-lead
entity: "lead:{input.id}"
notify:
  slack: {webhook: "{env.SLACK_OPS_WEBHOOK}"}
  email: {to: "ops@example.com", from: "onceflow@example.com"}
  reasons: [permanent_error, attempts_exhausted]
steps:
  - id: crm
    kind: go
    func: crm
  - id: whatsapp_notice
    kind: go
    func: whatsapp
    notify:
      reasons: [permanent_error]
      window: 15m
  - id: sales_task
    kind: go
    func: task
    notify: {off: true}
`

func notifyFuncs() map[string]onceflow.StepFunc {
	ok := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	return map[string]onceflow.StepFunc{"crm": ok, "task": ok,
		"whatsapp": func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(errors.New("number refused"))
		}}
}

func TestBuildNotify(t *testing.T) {
	// An SMTP server is configured; nothing connects to it.
	smtp := map[string]string{"ONCEFLOW_SMTP_ADDR": "127.0.0.1:1", "ONCEFLOW_SMTP_TLS": "none"}
	path := write(t, "lead.yaml", notifyYAML)
	defs, err := readerWith(t, stdsteps.Options{Env: func(k string) (string, bool) { v, ok := smtp[k]; return v, ok }}).LoadFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := NewBuilder(BuildOptions{}).Notify(defs)
	if err != nil {
		t.Fatal(err)
	}
	var chans []string
	for _, ch := range cfg.Channels {
		chans = append(chans, ch.Name)
	}
	wantChans := []string{"onceflow.notify-slack.slack_ops_webhook", "onceflow.notify-email.ops-example.com"}
	if !slices.Equal(chans, wantChans) {
		t.Fatalf("channels = %q, want %q", chans, wantChans)
	}
	if len(cfg.Policies) != 2 {
		t.Fatalf("%d policies, want the workflow's and whatsapp_notice's", len(cfg.Policies))
	}
	wf, step := cfg.Policies[0], cfg.Policies[1]
	if wf.Name != "website-lead" || wf.Workflow != "website-lead" || !slices.Equal(wf.Steps, []string{"crm"}) ||
		!slices.Equal(wf.Reasons, []onceflow.Reason{"permanent_error", "attempts_exhausted"}) || wf.Window != 0 || !slices.Equal(wf.Channels, wantChans) {
		t.Errorf("workflow policy = %+v: want every step without a notify block of its own", wf)
	}
	if step.Name != "website-lead/whatsapp_notice" || !slices.Equal(step.Steps, []string{"whatsapp_notice"}) ||
		!slices.Equal(step.Reasons, []onceflow.Reason{"permanent_error"}) || step.Window != 15*time.Minute || !slices.Equal(step.Channels, wantChans) {
		t.Errorf("step policy = %+v: want its own reasons and window, the workflow's channels", step)
	}

	// Without an SMTP server, e-mail notifications are a problem at their block.
	if defs, err = testReader.LoadFiles(path); err != nil {
		t.Fatal(err)
	}
	_, err = NewBuilder(BuildOptions{}).Notify(defs)
	if err == nil || !strings.Contains(err.Error(), "lead.yaml:5:10: email notifications: e-mail needs an SMTP server") {
		t.Errorf("BuildNotify without e-mail: %v", err)
	}
}

func TestNotifyProblemsHavePositions(t *testing.T) {
	src := `name: broken
notify:
  off: true
  slack: {webhook: "https://hooks.slack.com/services/T0/B0/secret"}
  reasons: [Permanent Error]
steps:
  - id: a
    kind: go
    func: f
    notify:
      off: true
      reasons: [permanent_error]
  - id: b
    kind: go
    func: f
    notify:
      email: {to: "{input.email}"}
      window: 10ms
`
	p := write(t, "broken.yaml", src)
	_, err := testReader.LoadFiles(p)
	if err == nil {
		t.Fatal("no problems")
	}
	got := err.Error()
	for _, want := range []string{
		p + ":3:8: off applies to steps",
		p + ":4:20: slack webhook: \"https://hooks.slack.com/services/T0/B0/secret\" must come from the environment",
		p + ":5:13: reason \"Permanent Error\" is not a review reason code",
		p + ":11:10: step \"a\": notify with off: true takes no other settings",
		p + ":17:14: step \"b\": email from is required",
		p + ":17:19: step \"b\": email to: {input.email}: notification settings read only {env.NAME}",
		p + ":18:15: step \"b\": window 10ms is shorter than a second",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q\ngot:\n%s", want, got)
		}
	}

	noChannel := "name: quiet\nsteps:\n  - id: a\n    kind: go\n    func: f\n    notify: {reasons: [permanent_error]}\n"
	p = write(t, "quiet.yaml", noChannel)
	if _, err := testReader.LoadFiles(p); err == nil || !strings.Contains(err.Error(), p+":6:13: step \"a\": notify needs a channel") {
		t.Errorf("a step notify block without a channel: %v", err)
	}
}

// A workflow file's notify block alerts Slack and e-mail once per incident, through the
// channels the standard kinds build.
func TestNotifyFromFile(t *testing.T) {
	var mu sync.Mutex
	var slack []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		_, _ = bufio.NewReader(r.Body).WriteTo(&b)
		mu.Lock()
		slack = append(slack, b.String())
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}))
	defer hook.Close()
	mail := smtptest.New(t)

	env := map[string]string{"SLACK_OPS_WEBHOOK": hook.URL + "/services/T0/B0/x", "ONCEFLOW_SMTP_ADDR": mail.Addr, "ONCEFLOW_SMTP_TLS": "none"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	reader := readerWith(t, stdsteps.Options{AllowNet: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Funcs: notifyFuncs(), Env: lookup})
	defs, err := reader.LoadFiles(write(t, "lead.yaml", notifyYAML))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(BuildOptions{Env: lookup})
	wfs, err := b.Workflows(defs)
	if err != nil {
		t.Fatal(err)
	}
	notify, err := b.Notify(defs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 3, 1, 10, 2, 0, 0, time.UTC)
	c, err := onceflow.New(onceflow.Config{Store: st, Notify: notify, Clock: func() time.Time { return now }, ClockSync: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(wfs[0]); err != nil {
		t.Fatal(err)
	}
	pass := func() {
		t.Helper()
		if _, err := c.Work(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Notify(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Work(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"web-1", "web-2", "web-3"} {
		if _, err := c.Start(ctx, "website-lead", id, map[string]any{"id": id}); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	now = now.Add(15 * time.Minute)
	pass()
	mu.Lock()
	defer mu.Unlock()
	if len(slack) != 2 || !strings.Contains(slack[0], `"text":"website-lead/whatsapp_notice (permanent_error) needs review`) ||
		!strings.Contains(slack[1], `"text":"2 more needs_review of website-lead/whatsapp_notice (permanent_error) since 2026-03-01 10:02 UTC`) {
		t.Fatalf("Slack got %d messages: %q", len(slack), slack)
	}
	subjects := mail.Subjects()
	if len(subjects) != 2 || subjects[0] != "[onceflow] website-lead/whatsapp_notice (permanent_error) needs review" ||
		subjects[1] != "[onceflow] 2 more needs_review of website-lead/whatsapp_notice (permanent_error)" {
		t.Fatalf("e-mails = %q, want the alert and the digest", subjects)
	}
}
