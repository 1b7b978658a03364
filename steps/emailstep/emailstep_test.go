package emailstep

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/netip"
	"net/textproto"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// loopback lets steps reach the in-process server through the real egress policy.
var loopback = &egress.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// redirect dials the test server whatever address the step asks for, so that a server
// can be named mail.test (not localhost, where credentials may travel unencrypted).
func redirect(to string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return loopback.DialContext(ctx, network, to)
	}
}

func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

func stepCtx(key, input string) *onceflow.StepContext {
	return &onceflow.StepContext{
		RunID: 7, RunKey: "order-8812", Workflow: "order", Step: "confirm", EffectKey: key, Attempt: 1,
		Input: json.RawMessage(input), Outputs: map[string]json.RawMessage{},
	}
}

const input = `{"name": "Zoë", "email": "zoe@example.com", "order": 8812}`

func simpleSpec() Spec {
	return Spec{
		From:    "Shop <noreply@example.com>",
		To:      "{input.email}",
		Subject: "Order {input.order}",
		Body:    "Your order {input.order} is confirmed.\n",
	}
}

func newStep(t *testing.T, spec Spec, srv Server, env map[string]string) *Step {
	t.Helper()
	s, err := New(spec, srv, envOf(env), loopback.DialContext)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stepError returns err's *onceflow.StepError, failing the test if there is none.
func stepError(t *testing.T, err error) *onceflow.StepError {
	t.Helper()
	var se *onceflow.StepError
	if !errors.As(err, &se) {
		t.Fatalf("error = %v, want a *onceflow.StepError", err)
	}
	return se
}

func readMessage(t *testing.T, data string) *mail.Message {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		t.Fatalf("delivered message does not parse: %v\n%s", err, data)
	}
	return msg
}

// wantMessageID computes the Message-ID independently of the package.
func wantMessageID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "<" + hex.EncodeToString(sum[:])[:32] + "@onceflow>"
}

func TestDeliversMessage(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	body := "Hello {input.name},\nyour order {input.order} is confirmed: café ☕.\n.a line that starts with a dot\n" +
		strings.Repeat("long line ", 12) + "\n"
	spec := Spec{
		From:    "Onceflow Shop <noreply@example.com>",
		To:      "{input.name} <{input.email}>, ops@example.com",
		Cc:      "audit@example.com, OPS@example.com",
		ReplyTo: "support@example.com",
		Subject: "Grüße, {input.name}: order {input.order}",
		Body:    body,
	}
	step := newStep(t, spec, Server{Addr: srv.addr, Username: "shop", Password: "pw-Secret-1"}, nil)
	out, err := step.Do(context.Background(), stepCtx("welcome:8812", input))
	if err != nil {
		t.Fatal(err)
	}
	want := Output{MessageID: strings.Trim(wantMessageID("welcome:8812"), "<>"), To: []string{"zoe@example.com", "ops@example.com"}, Accepted: true}
	if got, ok := out.(Output); !ok || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("output = %#v, want %#v", out, want)
	}
	b, _ := json.Marshal(out)
	if !strings.Contains(string(b), `"message_id":"`) || !strings.Contains(string(b), `"accepted":true`) {
		t.Errorf("output JSON = %s", b)
	}

	if got := srv.authsSeen(); len(got) != 1 || got[0] != "\x00shop\x00pw-Secret-1" {
		t.Errorf("AUTH PLAIN credentials received = %q", got)
	}
	ds := srv.deliveries()
	if len(ds) != 1 {
		t.Fatalf("%d messages delivered, want 1", len(ds))
	}
	d := ds[0]
	if !strings.HasPrefix(d.from, "<noreply@example.com>") {
		t.Errorf("MAIL FROM:%s", d.from)
	}
	if got := strings.Join(d.rcpt, " "); got != "<zoe@example.com> <ops@example.com> <audit@example.com>" {
		t.Errorf("RCPT TO: %s (each recipient once)", got)
	}

	msg := readMessage(t, d.data)
	h := msg.Header
	for name, want := range map[string]string{
		"Message-ID":                wantMessageID("welcome:8812"),
		"X-Onceflow-Effect-Key":     "welcome:8812",
		"MIME-Version":              "1.0",
		"Content-Type":              "text/plain; charset=utf-8",
		"Content-Transfer-Encoding": "quoted-printable",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if _, err := h.Date(); err != nil {
		t.Errorf("Date: %v", err)
	}
	rawSubject := h.Get("Subject")
	if !strings.HasPrefix(strings.ToLower(rawSubject), "=?utf-8?q?") {
		t.Errorf("Subject %q is not RFC 2047 Q-encoded", rawSubject)
	}
	if got, err := new(mime.WordDecoder).DecodeHeader(rawSubject); err != nil || got != "Grüße, Zoë: order 8812" {
		t.Errorf("Subject decodes to %q, %v", got, err)
	}
	addrs := func(field string) string {
		list, err := h.AddressList(field)
		if err != nil {
			t.Errorf("%s: %v", field, err)
		}
		var s []string
		for _, a := range list {
			s = append(s, a.String())
		}
		return strings.Join(s, ", ")
	}
	for field, want := range map[string]string{
		"From":     `"Onceflow Shop" <noreply@example.com>`,
		"To":       `=?utf-8?q?Zo=C3=AB?= <zoe@example.com>, <ops@example.com>`,
		"Cc":       `<audit@example.com>, <OPS@example.com>`,
		"Reply-To": `<support@example.com>`,
	} {
		if got := addrs(field); got != want {
			t.Errorf("%s: %s, want %s", field, got, want)
		}
	}

	raw, _ := io.ReadAll(msg.Body)
	if !strings.Contains(string(raw), "caf=C3=A9") {
		t.Errorf("body is not quoted-printable:\n%s", raw)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if len(line) > 76 {
			t.Errorf("body line of %d characters: %q", len(line), line)
		}
	}
	decoded, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(string(raw))))
	if err != nil {
		t.Fatal(err)
	}
	wantBody := strings.NewReplacer("{input.name}", "Zoë", "{input.order}", "8812").Replace(body)
	if string(decoded) != wantBody {
		t.Errorf("body decodes to\n%q\nwant\n%q", decoded, wantBody)
	}
}

func TestMessageIDDependsOnlyOnEffectKey(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	step := newStep(t, simpleSpec(), Server{Addr: srv.addr}, nil)
	for _, key := range []string{"welcome:8812", "welcome:8812", "welcome:8813"} {
		sc := stepCtx(key, input)
		sc.Attempt = 2 // nothing but the key may matter
		if _, err := step.Do(context.Background(), sc); err != nil {
			t.Fatal(err)
		}
	}
	ds := srv.deliveries()
	if len(ds) != 3 {
		t.Fatalf("%d messages, want 3", len(ds))
	}
	var ids []string
	for _, d := range ds {
		ids = append(ids, readMessage(t, d.data).Header.Get("Message-ID"))
	}
	if ids[0] != wantMessageID("welcome:8812") || ids[1] != ids[0] {
		t.Errorf("two attempts under one key carry %s and %s, want %s", ids[0], ids[1], wantMessageID("welcome:8812"))
	}
	if ids[2] != wantMessageID("welcome:8813") || ids[2] == ids[0] {
		t.Errorf("another key carries %s, want %s", ids[2], wantMessageID("welcome:8813"))
	}
}

func TestHTMLBody(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	spec := simpleSpec()
	spec.HTML, spec.Body = true, "<p>Order <b>{input.order}</b></p>"
	if _, err := newStep(t, spec, Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("k", input)); err != nil {
		t.Fatal(err)
	}
	msg := readMessage(t, srv.deliveries()[0].data)
	if got := msg.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("Content-Type: %s", got)
	}
	b, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if got := strings.TrimSpace(string(b)); got != "<p>Order <b>8812</b></p>" {
		t.Errorf("body: %q", got)
	}
}

func TestRenderedValuesCannotAddHeaders(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	spec := simpleSpec()
	spec.Subject = "{input.subject}"
	in := `{"email": "zoe@example.com", "order": 8812, "subject": "hi\r\nBcc: evil@example.com\nX-Evil: 1"}`
	if _, err := newStep(t, spec, Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("key\r\nX-Evil: 2", in)); err != nil {
		t.Fatal(err)
	}
	d := srv.deliveries()[0]
	msg := readMessage(t, d.data)
	if msg.Header.Get("Bcc") != "" || msg.Header.Get("X-Evil") != "" || len(d.rcpt) != 1 {
		t.Errorf("rendered values added headers or recipients: %v, RCPT %v", msg.Header, d.rcpt)
	}
	subject, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if subject != "hi Bcc: evil@example.com X-Evil: 1" {
		t.Errorf("Subject: %q", subject)
	}
	key, _ := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("X-Onceflow-Effect-Key"))
	if key != "key\r\nX-Evil: 2" {
		t.Errorf("X-Onceflow-Effect-Key decodes to %q", key)
	}
}

func TestLongHeadersAreFolded(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	var to []string
	for i := range 12 {
		to = append(to, fmt.Sprintf("Customer Number %d <customer-%d@example.com>", i, i))
	}
	spec := simpleSpec()
	spec.To = strings.Join(to, ", ")
	spec.Subject = strings.Repeat("a rather long subject ", 8)
	if _, err := newStep(t, spec, Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("k", input)); err != nil {
		t.Fatal(err)
	}
	data := srv.deliveries()[0].data
	head, _, _ := strings.Cut(data, "\n\n")
	for _, line := range strings.Split(head, "\n") {
		if len(line) > 78 {
			t.Errorf("header line of %d characters: %q", len(line), line)
		}
	}
	msg := readMessage(t, data)
	if list, err := msg.Header.AddressList("To"); err != nil || len(list) != 12 || list[11].Address != "customer-11@example.com" {
		t.Errorf("To: %v, %v", list, err)
	}
	if got := msg.Header.Get("Subject"); got != strings.TrimSpace(spec.Subject) {
		t.Errorf("Subject unfolds to %q", got)
	}
}

func TestFaultsAreClassified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       serverConfig
		class     onceflow.ErrorClass
		status    int
		delivered int // messages the server received in full
	}{
		{"greeting 421", serverConfig{greeting: "421 4.3.2 busy"}, onceflow.Retryable, 421, 0},
		{"greeting 554", serverConfig{greeting: "554 5.3.2 no service"}, onceflow.Permanent, 554, 0},
		{"AUTH 454", serverConfig{authReply: "454 4.7.0 try later"}, onceflow.Retryable, 454, 0},
		{"AUTH 535", serverConfig{authReply: "535 5.7.8 bad credentials"}, onceflow.Permanent, 535, 0},
		{"MAIL 451", serverConfig{mailReply: "451 4.3.0 try later"}, onceflow.Retryable, 451, 0},
		{"MAIL 550", serverConfig{mailReply: "550 5.7.1 sender refused"}, onceflow.Permanent, 550, 0},
		{"RCPT 451", serverConfig{rcptReply: "451 4.3.0 greylisted, try later"}, onceflow.Retryable, 451, 0},
		{"RCPT 550", serverConfig{rcptReply: "550 5.1.1 no such user"}, onceflow.Permanent, 550, 0},
		{"dropped at RCPT", serverConfig{rcptReply: drop}, onceflow.Retryable, 0, 0},
		{"dropped after the body", serverConfig{afterData: drop}, onceflow.Unknown, 0, 1},
		{"452 after the body", serverConfig{afterData: "452 4.3.1 out of space"}, onceflow.Retryable, 452, 1},
		{"554 after the body", serverConfig{afterData: "554 5.6.0 message refused"}, onceflow.Permanent, 554, 1},
		{"unexpected reply after the body", serverConfig{afterData: "354 again?"}, onceflow.Unknown, 354, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, tt.cfg)
			step := newStep(t, simpleSpec(), Server{Addr: srv.addr, Username: "shop", Password: "pw-Secret-1"}, nil)
			out, err := step.Do(context.Background(), stepCtx("k", input))
			if err == nil {
				t.Fatalf("Do succeeded with %v", out)
			}
			se := stepError(t, err)
			if se.Class != tt.class || onceflow.ClassOf(err) != tt.class {
				t.Errorf("class %s (ClassOf %s), want %s: %v", se.Class, onceflow.ClassOf(err), tt.class, err)
			}
			if se.ResponseStatus != tt.status {
				t.Errorf("response status %d, want %d", se.ResponseStatus, tt.status)
			}
			if tt.status != 0 && !strings.HasPrefix(se.ResponseExcerpt, fmt.Sprint(tt.status)) {
				t.Errorf("response excerpt %q", se.ResponseExcerpt)
			}
			if n := len(srv.deliveries()); n != tt.delivered {
				t.Errorf("server received %d messages, want %d", n, tt.delivered)
			}
			if !strings.Contains(err.Error(), srv.addr) {
				t.Errorf("error does not name the server: %v", err)
			}
		})
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = newStep(t, simpleSpec(), Server{Addr: addr}, nil).Do(context.Background(), stepCtx("k", input))
	if se := stepError(t, err); se.Class != onceflow.Retryable {
		t.Errorf("class %s, want retryable: %v", se.Class, err)
	}
}

func TestEgressPolicyBlocksServer(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	step, err := New(simpleSpec(), Server{Addr: srv.addr}, nil, (&egress.Policy{}).DialContext)
	if err != nil {
		t.Fatal(err)
	}
	_, err = step.Do(context.Background(), stepCtx("k", input))
	se := stepError(t, err)
	if se.Class != onceflow.Permanent || se.Reason != ReasonDestinationBlocked || !errors.Is(err, egress.ErrBlocked) {
		t.Errorf("class %s reason %q: %v; want permanent %s", se.Class, se.Reason, err, ReasonDestinationBlocked)
	}
	if srv.connections() != 0 {
		t.Error("the blocked server was reached")
	}
}

func TestTimeoutsAreHonoured(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     serverConfig
		timeout time.Duration // Spec.Timeout
		ctx     time.Duration // the attempt's own deadline, when set
		class   onceflow.ErrorClass
	}{
		{"stall after the body, step timeout", serverConfig{afterData: stall}, 100 * time.Millisecond, 0, onceflow.Unknown},
		{"stall after the body, attempt deadline", serverConfig{afterData: stall}, 0, 100 * time.Millisecond, onceflow.Unknown},
		{"stall at RCPT", serverConfig{rcptReply: stall}, 100 * time.Millisecond, 0, onceflow.Retryable},
		{"stall at the greeting", serverConfig{greeting: stall}, 100 * time.Millisecond, 0, onceflow.Retryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, tt.cfg)
			spec := simpleSpec()
			spec.Timeout = tt.timeout
			ctx := context.Background()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			_, err := newStep(t, spec, Server{Addr: srv.addr}, nil).Do(ctx, stepCtx("k", input))
			<-srv.stalled // the server did stall where it was told to
			se := stepError(t, err)
			if se.Class != tt.class || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("class %s, want %s matching context.DeadlineExceeded: %v", se.Class, tt.class, err)
			}
		})
	}
}

func TestCancellationAfterTheBodyLeavesTheOutcomeUnknown(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{afterData: stall})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-srv.stalled
		cancel()
	}()
	_, err := newStep(t, simpleSpec(), Server{Addr: srv.addr}, nil).Do(ctx, stepCtx("k", input))
	if se := stepError(t, err); se.Class != onceflow.Unknown || !errors.Is(err, context.Canceled) {
		t.Errorf("class %s: %v; want unknown, matching context.Canceled", se.Class, err)
	}
}

func TestMissingTemplateFieldIsPermanent(t *testing.T) {
	t.Parallel()
	srv := startServer(t, serverConfig{})
	spec := simpleSpec()
	spec.Cc = "{input.manager.email}"
	_, err := newStep(t, spec, Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("k", input))
	se := stepError(t, err)
	var fe *keytmpl.FieldError
	if se.Class != onceflow.Permanent || !errors.As(err, &fe) || fe.Field != "input.manager.email" {
		t.Fatalf("class %s: %v; want permanent naming input.manager.email", se.Class, err)
	}
	if !strings.Contains(err.Error(), "email cc") || !strings.Contains(err.Error(), "input.manager.email is missing") {
		t.Errorf("error does not name the field: %v", err)
	}
	if srv.connections() != 0 {
		t.Error("the server was contacted")
	}
}

func TestInvalidRenderedAddressIsPermanent(t *testing.T) {
	t.Parallel()
	tests := []struct{ field, bad string }{
		{"from", "shop at example.com"},
		{"to", "not-an-address"},
		{"cc", "a@example.com b@example.com"},
		{"reply_to", "<unterminated@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, serverConfig{})
			spec := simpleSpec()
			switch tt.field {
			case "from":
				spec.From = "{input.bad}"
			case "to":
				spec.To = "{input.bad}"
			case "cc":
				spec.Cc = "{input.bad}"
			case "reply_to":
				spec.ReplyTo = "{input.bad}"
			}
			in, _ := json.Marshal(map[string]any{"email": "zoe@example.com", "order": 8812, "bad": tt.bad})
			_, err := newStep(t, spec, Server{Addr: srv.addr}, nil).Do(context.Background(), stepCtx("k", string(in)))
			se := stepError(t, err)
			if se.Class != onceflow.Permanent {
				t.Errorf("class %s, want permanent: %v", se.Class, err)
			}
			if !strings.Contains(err.Error(), "email "+tt.field+":") || !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.bad)) {
				t.Errorf("error does not name the field and the address: %v", err)
			}
			if srv.connections() != 0 {
				t.Error("the server was contacted")
			}
		})
	}
}

func TestMissingEnvironmentVariableIsPermanent(t *testing.T) {
	t.Parallel()
	spec := simpleSpec()
	spec.Body = "token {env.API_TOKEN}"
	_, err := newStep(t, spec, Server{Addr: "127.0.0.1:25"}, map[string]string{}).Do(context.Background(), stepCtx("k", input))
	if se := stepError(t, err); se.Class != onceflow.Permanent || !strings.Contains(err.Error(), "API_TOKEN") {
		t.Errorf("class %s: %v; want permanent naming API_TOKEN", se.Class, err)
	}
}

// chain returns the text of err and of every error in its tree.
func chain(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	switch x := err.(type) {
	case interface{ Unwrap() error }:
		s += "\n" + chain(x.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			s += "\n" + chain(e)
		}
	}
	var tpe *textproto.Error
	if errors.As(err, &tpe) {
		s += "\n" + tpe.Msg
	}
	return s
}

func TestSecretsNeverAppearInErrors(t *testing.T) {
	t.Parallel()
	const password, token = "pw-Secret-1", "tok-4f9a81c2"
	blob := base64.StdEncoding.EncodeToString([]byte("\x00shop\x00" + password))
	tests := []struct {
		name string
		cfg  serverConfig
		to   string
	}{
		{"AUTH reply echoes the credentials", serverConfig{authReply: "535 5.7.8 refused " + password + " " + blob}, "{input.email}"},
		{"RCPT reply echoes a secret", serverConfig{rcptReply: "550 5.1.1 unknown user " + token}, "{input.email}"},
		{"reply after the body echoes a secret", serverConfig{afterData: "554 5.6.0 body contains " + token}, "{input.email}"},
		{"rendered address holds a secret", serverConfig{}, "{env.API_TOKEN}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, tt.cfg)
			spec := simpleSpec()
			spec.To, spec.Body = tt.to, "Token: {env.API_TOKEN}"
			step := newStep(t, spec, Server{Addr: srv.addr, Username: "shop", Password: password}, map[string]string{"API_TOKEN": token})
			_, err := step.Do(context.Background(), stepCtx("k", input))
			se := stepError(t, err)
			text := chain(err) + "\n" + se.ResponseExcerpt
			for _, secret := range []string{password, blob, token} {
				if strings.Contains(text, secret) {
					t.Errorf("secret %q appears in the error or the excerpt:\n%s", secret, text)
				}
			}
			if !strings.Contains(text, "[redacted]") {
				t.Errorf("nothing was masked:\n%s", text)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	t.Parallel()
	cert := testCert(t)
	creds := func(s Server) Server { s.Username, s.Password = "shop", "pw-Secret-1"; return s }
	tests := []struct {
		name  string
		cfg   serverConfig
		srv   Server
		class onceflow.ErrorClass // "" for success
	}{
		{"STARTTLS when offered", serverConfig{startTLS: cert}, creds(Server{Addr: "mail.test:587", InsecureSkipVerify: true}), ""},
		{"STARTTLS required", serverConfig{startTLS: cert}, creds(Server{Addr: "mail.test:587", TLS: TLSStartTLS, InsecureSkipVerify: true}), ""},
		{"implicit TLS", serverConfig{tls: cert}, creds(Server{Addr: "mail.test:465", TLS: TLSImplicit, InsecureSkipVerify: true}), ""},
		{"certificate verified by default", serverConfig{startTLS: cert}, creds(Server{Addr: "mail.test:587"}), onceflow.Retryable},
		{"STARTTLS required but not offered", serverConfig{}, Server{Addr: "mail.test:587", TLS: TLSStartTLS}, onceflow.Permanent},
		{"no credentials without TLS", serverConfig{}, creds(Server{Addr: "mail.test:587"}), onceflow.Permanent},
		{"credentials but no AUTH", serverConfig{noAuth: true, startTLS: cert}, creds(Server{Addr: "mail.test:587", InsecureSkipVerify: true}), onceflow.Permanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, tt.cfg)
			step, err := New(simpleSpec(), tt.srv, nil, redirect(srv.addr))
			if err != nil {
				t.Fatal(err)
			}
			_, err = step.Do(context.Background(), stepCtx("k", input))
			ds := srv.deliveries()
			if tt.class != "" {
				if se := stepError(t, err); se.Class != tt.class {
					t.Errorf("class %s, want %s: %v", se.Class, tt.class, err)
				}
				if len(ds) != 0 || len(srv.authsSeen()) != 0 {
					t.Errorf("the server received %d messages and credentials %q", len(ds), srv.authsSeen())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || !ds[0].tls {
				t.Fatalf("deliveries %+v, want one over TLS", ds)
			}
			if got := srv.authsSeen(); len(got) != 1 || got[0] != "\x00shop\x00pw-Secret-1" {
				t.Errorf("credentials received: %q", got)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	dial := loopback.DialContext
	ok := Server{Addr: "smtp.example.com:587"}
	tests := []struct {
		name string
		spec func(*Spec)
		srv  Server
		env  func(string) (string, bool)
		dial func(context.Context, string, string) (net.Conn, error)
		want string
	}{
		{"no from", func(s *Spec) { s.From = "" }, ok, nil, dial, "from is required"},
		{"no to", func(s *Spec) { s.To = " " }, ok, nil, dial, "to is required"},
		{"bad literal from", func(s *Spec) { s.From = "noreply" }, ok, nil, dial, `from: "noreply"`},
		{"bad literal cc", func(s *Spec) { s.Cc = "a@example.com; b@example.com" }, ok, nil, dial, "cc:"},
		{"bad template", func(s *Spec) { s.Subject = "Order {input.order" }, ok, nil, dial, "never closed"},
		{"unknown template root", func(s *Spec) { s.Body = "{secrets.x}" }, ok, nil, dial, "templates read input"},
		{"env without lookup", func(s *Spec) { s.Body = "{env.TOKEN}" }, ok, nil, dial, "{env.TOKEN}"},
		{"no dial", func(*Spec) {}, ok, nil, nil, "dial is required"},
		{"no server address", func(*Spec) {}, Server{}, nil, dial, "server address is required"},
		{"server address without port", func(*Spec) {}, Server{Addr: "smtp.example.com"}, nil, dial, "not host:port"},
		{"bad TLS mode", func(*Spec) {}, Server{Addr: "smtp.example.com:587", TLS: "ssl"}, nil, dial, `"ssl" is not one of`},
		{"username without password", func(*Spec) {}, Server{Addr: "smtp.example.com:587", Username: "shop"}, nil, dial, "both a username and a password"},
		{"credentials in clear", func(*Spec) {}, Server{Addr: "smtp.example.com:25", TLS: TLSNone, Username: "shop", Password: "pw-Secret-1"}, nil, dial, "unencrypted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := simpleSpec()
			tt.spec(&spec)
			_, err := New(spec, tt.srv, tt.env, tt.dial)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw-Secret-1") {
				t.Errorf("error reveals the password: %v", err)
			}
		})
	}
	if _, err := New(simpleSpec(), Server{Addr: "localhost:25", TLS: TLSNone, Username: "u", Password: "p"}, nil, dial); err != nil {
		t.Errorf("credentials to localhost without TLS: %v", err)
	}
}

func TestServerFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want Server
		err  string
	}{
		{"full", map[string]string{EnvAddr: "smtp.example.com:587", EnvUsername: "shop", EnvPassword: "pw-Secret-1", EnvTLS: "STARTTLS"},
			Server{Addr: "smtp.example.com:587", Username: "shop", Password: "pw-Secret-1", TLS: TLSStartTLS}, ""},
		{"address only", map[string]string{EnvAddr: " localhost:25 "}, Server{Addr: "localhost:25"}, ""},
		{"missing address", map[string]string{EnvUsername: "shop"}, Server{}, "ONCEFLOW_SMTP_ADDR is not set"},
		{"address without port", map[string]string{EnvAddr: "smtp.example.com"}, Server{}, "ONCEFLOW_SMTP_ADDR: \"smtp.example.com\" is not host:port"},
		{"bad TLS", map[string]string{EnvAddr: "smtp.example.com:465", EnvTLS: "ssl"}, Server{}, "ONCEFLOW_SMTP_TLS: \"ssl\" is not one of"},
		{"password without username", map[string]string{EnvAddr: "smtp.example.com:587", EnvPassword: "pw-Secret-1"}, Server{}, "ONCEFLOW_SMTP_PASSWORD is set but ONCEFLOW_SMTP_USERNAME is not"},
		{"username without password", map[string]string{EnvAddr: "smtp.example.com:587", EnvUsername: "shop"}, Server{}, "ONCEFLOW_SMTP_USERNAME is set but ONCEFLOW_SMTP_PASSWORD is not"},
		{"credentials in clear", map[string]string{EnvAddr: "smtp.example.com:25", EnvUsername: "shop", EnvPassword: "pw-Secret-1", EnvTLS: "none"}, Server{}, "unencrypted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ServerFromEnv(func(name string) string { return tt.env[name] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "pw-Secret-1") {
					t.Fatalf("error = %v, want one containing %q and no password", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ServerFromEnv = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestEngine runs email steps through the engine on a real SQLite store: the reply is
// recorded with the attempt, and with DefaultOnUnknown a dropped connection after the
// body parks the step for review instead of sending the message again.
func TestEngine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       serverConfig
		state     store.State
		reason    store.Reason
		status    int
		excerpt   string
		outcome   store.Outcome
		delivered int
	}{
		{"delivered", serverConfig{}, store.StateCompleted, "", 250, "2.0.0 OK: queued as Q1", store.OutcomeSuccess, 1},
		{"dropped after the body", serverConfig{afterData: drop}, store.StateNeedsReview, store.ReasonOutcomeUnknown, 0, "", store.OutcomeUnknown, 1},
		{"refused", serverConfig{rcptReply: "550 5.1.1 no such user"}, store.StateNeedsReview, store.ReasonPermanentError, 550, "550 5.1.1 no such user", store.OutcomePermanent, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := startServer(t, tt.cfg)
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			client, err := onceflow.New(onceflow.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			step := newStep(t, simpleSpec(), Server{Addr: srv.addr}, nil)
			err = client.Register(onceflow.Workflow{Name: "order", Steps: []onceflow.Step{{
				ID: "confirm", EffectKey: "order-confirmation:{input.order}", Do: step.Do, OnUnknown: DefaultOnUnknown,
			}}})
			if err != nil {
				t.Fatal(err)
			}
			run, err := client.Start(ctx, "order", "order-8812", json.RawMessage(input))
			if err != nil {
				t.Fatal(err)
			}
			for {
				n, err := client.Work(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			steps, err := st.StepListByRun(ctx, run.ID)
			if err != nil || len(steps) != 1 {
				t.Fatalf("steps %v, %v", steps, err)
			}
			if s := steps[0]; s.State != tt.state || s.Reason != tt.reason {
				t.Errorf("step %s (%s), want %s (%s); last error %q", s.State, s.Reason, tt.state, tt.reason, s.LastError)
			}
			attempts, err := st.AttemptListByRun(ctx, run.ID)
			if err != nil || len(attempts) != 1 {
				t.Fatalf("attempts %v, %v; want exactly one", attempts, err)
			}
			a := attempts[0]
			if a.Outcome != tt.outcome || a.ResponseStatus != tt.status || a.ResponseExcerpt != tt.excerpt {
				t.Errorf("attempt %s %d %q, want %s %d %q", a.Outcome, a.ResponseStatus, a.ResponseExcerpt, tt.outcome, tt.status, tt.excerpt)
			}
			if n := len(srv.deliveries()); n != tt.delivered {
				t.Errorf("%d messages received, want %d", n, tt.delivered)
			}
		})
	}
}
