package emailstep

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/quotedprintable"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/smtptest"
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

// The envelope carries exactly the address that was checked: a quoted local part, which
// net/mail unquotes, arrived as RCPT TO:<victim@corp.example@evil.example>; a domain
// literal named a host. Both are refused, permanently, before the server is contacted,
// whether the address comes from the run's data or is written in the step.
func TestEnvelopeCarriesTheCheckedAddress(t *testing.T) {
	t.Parallel()
	sink := smtptest.New(t)
	spec := simpleSpec()
	spec.Cc = "{input.cc}"
	for _, bad := range []string{`"victim@corp.example"@evil.example`, `Zoë <"victim@corp.example"@evil.example>`,
		`"john doe"@example.com`, `a@[127.0.0.1]`, `a@[IPv6:::1]`, `a@evil_host.example`} {
		in, _ := json.Marshal(map[string]any{"email": bad, "cc": "ops@example.com", "order": 1})
		_, err := newStep(t, spec, Server{Addr: sink.Addr}, nil).Do(context.Background(), stepCtx("k", string(in)))
		if err == nil || onceflow.ClassOf(err) != onceflow.Permanent || !strings.Contains(err.Error(), "email to:") {
			t.Errorf("to %s: %v, want a permanent refusal", bad, err)
		}
		in, _ = json.Marshal(map[string]any{"email": "zoe@example.com", "cc": bad, "order": 1})
		if _, err := newStep(t, spec, Server{Addr: sink.Addr}, nil).Do(context.Background(), stepCtx("k", string(in))); err == nil || onceflow.ClassOf(err) != onceflow.Permanent {
			t.Errorf("cc %s: %v, want a permanent refusal", bad, err)
		}
		fixed := simpleSpec()
		fixed.From = bad
		if _, err := New(fixed, Server{Addr: sink.Addr}, nil, loopback.DialContext); err == nil {
			t.Errorf("from %s written in the step was accepted", bad)
		}
	}
	if msgs := sink.Messages(); len(msgs) != 0 {
		var rcpts []string
		for _, m := range msgs {
			rcpts = append(rcpts, "RCPT TO:"+strings.Join(m.To, ", RCPT TO:"))
		}
		t.Fatalf("the server received %d messages: %s", len(msgs), strings.Join(rcpts, "; "))
	}

	// A display name, and quotes around a local part that needs none, change nothing.
	in, _ := json.Marshal(map[string]any{"email": `Zoë "the customer" <zoe@example.com>`, "cc": `"ops"@example.com`, "order": 1})
	if _, err := newStep(t, spec, Server{Addr: sink.Addr}, nil).Do(context.Background(), stepCtx("k2", string(in))); err != nil {
		t.Fatal(err)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 || msgs[0].From != "<noreply@example.com>" || strings.Join(msgs[0].To, " ") != "<zoe@example.com> <ops@example.com>" {
		t.Fatalf("envelopes %+v", msgs)
	}
}

// In an html: true body a value from the run's data is escaped for where it lands: a
// name holding a link arrived as a live link in mail sent from the shop's address. The
// subject, a header, is not HTML and is not escaped; {+field} splices raw HTML in an HTML
// body's text, and nowhere else.
func TestHTMLBodyEscapesValues(t *testing.T) {
	t.Parallel()
	sink := smtptest.New(t)
	const evil = `<a href="https://evil.example/login">Your account is locked</a>`
	spec := simpleSpec()
	spec.HTML, spec.Subject = true, "Order for {input.name}"
	spec.Body = `<p>Dear {input.name},</p><p><a href="https://shop.example/orders/{input.order}" title="{input.name}">your order</a></p>{+input.banner}`
	in, _ := json.Marshal(map[string]any{"email": "zoe@example.com", "order": "8812/../admin", "name": evil, "banner": "<hr><p>Summer sale</p>"})
	if _, err := newStep(t, spec, Server{Addr: sink.Addr}, nil).Do(context.Background(), stepCtx("k", string(in))); err != nil {
		t.Fatal(err)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	msg := readMessage(t, msgs[0].Data)
	b, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
	body := string(b)
	const want = `<p>Dear &lt;a href=&#34;https://evil.example/login&#34;&gt;Your account is locked&lt;/a&gt;,</p>` +
		`<p><a href="https://shop.example/orders/8812%2F..%2Fadmin" title="&lt;a href=&#34;https://evil.example/login&#34;&gt;Your account is locked&lt;/a&gt;">your order</a></p>` +
		`<hr><p>Summer sale</p>`
	if strings.TrimSpace(body) != want {
		t.Errorf("body:\n%s\nwant\n%s", body, want)
	}
	if strings.Contains(body, `<a href="https://evil.example`) {
		t.Error("the name arrived as a live link")
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil || subject != "Order for "+evil {
		t.Errorf("subject %q (%v), want the name as it is", subject, err)
	}

	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{From: "a@example.com", To: "{input.email}", Subject: "x", Body: "Hello {+input.name}"}, "email body: {+field} splices raw HTML, which only the body of an html: true message may hold"},
		{Spec{From: "a@example.com", To: "{input.email}", Subject: "{+input.name}", Body: "x", HTML: true}, "email subject: {+field} splices raw HTML"},
		{Spec{From: "a@example.com", To: "{input.email}", Subject: "x", Body: `<a href={input.url}>`, HTML: true}, "email body: template \"<a href={input.url}>\": field {input.url}: a value may not stand inside a tag"},
		{Spec{From: "a@example.com", To: "{input.email}", Subject: "x", Body: `<p onclick="{input.x}">`, HTML: true}, "in the onclick attribute"},
	} {
		if _, err := New(tc.spec, Server{Addr: sink.Addr}, nil, loopback.DialContext); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
	}
	// A link from the run's data must be http, https or mailto.
	spec.Body = `<a href="{input.link}">open</a>`
	in, _ = json.Marshal(map[string]any{"email": "zoe@example.com", "order": 1, "name": "Zoë", "link": "javascript:alert(1)"})
	_, err = newStep(t, spec, Server{Addr: sink.Addr}, nil).Do(context.Background(), stepCtx("k2", string(in)))
	if se := stepError(t, err); se.Class != onceflow.Permanent || !strings.Contains(err.Error(), "is not an http, https or mailto URL") {
		t.Errorf("a javascript: link: %v", err)
	}
	if n := len(sink.Messages()); n != 1 {
		t.Errorf("%d messages, want the first only", n)
	}
}
