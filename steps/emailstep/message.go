package emailstep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/keytmpl"
)

// message is a rendered message, ready for an SMTP transaction.
type message struct {
	id      string   // Message-ID without angle brackets
	from    string   // envelope sender
	rcpt    []string // envelope recipients: To and Cc, each once
	toAddrs []string // the To addresses, for the output
	data    []byte   // RFC 5322 text with CRLF line ends, not dot-stuffed
}

// MessageID returns the Message-ID (without angle brackets) of every message sent under
// effectKey: the first 32 hex digits of its SHA-256, at "onceflow".
func MessageID(effectKey string) string {
	sum := sha256.Sum256([]byte(effectKey))
	return hex.EncodeToString(sum[:])[:32] + "@onceflow"
}

// compose renders the templates and builds the message. Its errors name the field.
func (s *Step) compose(data map[string]any, effectKey string) (*message, error) {
	render := func(name string, t *keytmpl.Template) (string, error) {
		if t == nil {
			return "", nil
		}
		v, err := t.Render(data)
		if err != nil {
			return "", fmt.Errorf("email %s: %w", name, err)
		}
		return v, nil
	}
	var (
		from             *mail.Address
		to, cc, replyTo  []*mail.Address
		subject, body, v string
		err              error
	)
	if v, err = render("from", s.tmpl.from); err != nil {
		return nil, err
	}
	if from, err = parseAddress("email from", v); err != nil {
		return nil, err
	}
	lists := []struct {
		name string
		t    *keytmpl.Template
		dst  *[]*mail.Address
	}{{"to", s.tmpl.to, &to}, {"cc", s.tmpl.cc, &cc}, {"reply_to", s.tmpl.replyTo, &replyTo}}
	for _, l := range lists {
		if l.t == nil {
			continue
		}
		if v, err = render(l.name, l.t); err != nil {
			return nil, err
		}
		if *l.dst, err = parseList("email "+l.name, v); err != nil {
			return nil, err
		}
		if n := templateItems(l.t.String()); !s.spec.AllowLists && len(*l.dst) > n {
			return nil, fmt.Errorf("email %s: the template %q names %d address(es) but its values hold %d; a template value is one address (set allow_lists: true to accept lists)",
				l.name, l.t.String(), n, len(*l.dst))
		}
	}
	if subject, err = render("subject", s.tmpl.subject); err != nil {
		return nil, err
	}
	if s.tmpl.html != nil {
		if body, err = s.tmpl.html.Render(data); err != nil {
			return nil, fmt.Errorf("email body: %w", err)
		}
	} else if body, err = render("body", s.tmpl.body); err != nil {
		return nil, err
	}

	m := &message{id: MessageID(effectKey), from: from.Address}
	seen := map[string]bool{}
	for _, a := range append(append([]*mail.Address(nil), to...), cc...) {
		if k := strings.ToLower(a.Address); !seen[k] {
			seen[k] = true
			m.rcpt = append(m.rcpt, a.Address)
		}
	}
	for _, a := range to {
		m.toAddrs = append(m.toAddrs, a.Address)
	}

	var b bytes.Buffer
	header(&b, "Message-ID", "<"+m.id+">")
	header(&b, "Date", s.now().Format(time.RFC1123Z))
	header(&b, "From", from.String())
	header(&b, "To", addressList(to))
	if len(cc) > 0 {
		header(&b, "Cc", addressList(cc))
	}
	if len(replyTo) > 0 {
		header(&b, "Reply-To", addressList(replyTo))
	}
	header(&b, "Subject", mime.QEncoding.Encode("utf-8", oneLine(subject)))
	header(&b, "MIME-Version", "1.0")
	if s.spec.HTML {
		header(&b, "Content-Type", "text/html; charset=utf-8")
	} else {
		header(&b, "Content-Type", "text/plain; charset=utf-8")
	}
	header(&b, "Content-Transfer-Encoding", "quoted-printable")
	// Q-encoding leaves printable ASCII alone and encodes anything else, line breaks
	// included, so a key can never add a header.
	header(&b, "X-Onceflow-Effect-Key", mime.QEncoding.Encode("utf-8", effectKey))
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(body)); err != nil {
		return nil, fmt.Errorf("email body: %w", err)
	}
	if err := qp.Close(); err != nil {
		return nil, fmt.Errorf("email body: %w", err)
	}
	if !bytes.HasSuffix(b.Bytes(), []byte("\r\n")) {
		b.WriteString("\r\n")
	}
	m.data = b.Bytes()
	return m, nil
}

// templateItems counts the comma-separated items of an address template, commas inside
// quotes and template fields aside: "{input.email}" is one, "ops@example.com,
// {input.email}" two.
func templateItems(src string) int {
	n, quoted, field := 1, false, false
	for _, c := range src {
		switch {
		case c == '"' && !field:
			quoted = !quoted
		case c == '{' && !quoted:
			field = true
		case c == '}' && !quoted:
			field = false
		case c == ',' && !quoted && !field:
			n++
		}
	}
	return n
}

// oneLine turns line breaks into spaces: a subject is a single line.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}

func addressList(list []*mail.Address) string {
	parts := make([]string, len(list))
	for i, a := range list {
		parts[i] = a.String() // quotes or RFC 2047-encodes the display name as needed
	}
	return strings.Join(parts, ", ")
}

// maxLine is the line length headers are folded to where they have white space.
const maxLine = 78

// header writes "name: value", folded before white space so that lines stay within
// maxLine characters where possible. Unfolding (removing the CRLFs) restores the value.
func header(b *bytes.Buffer, name, value string) {
	line := name + ": " + value
	minBreak := len(name) + 2 // never fold between the name and the first word
	for len(line) > maxLine {
		i := strings.LastIndexByte(line[:maxLine], ' ')
		if i < minBreak {
			j := strings.IndexByte(line[maxLine:], ' ')
			if j < 0 {
				break
			}
			i = maxLine + j
		}
		b.WriteString(line[:i])
		b.WriteString("\r\n")
		line = line[i:] // the white space starts the continuation line
		minBreak = 1
	}
	b.WriteString(line)
	b.WriteString("\r\n")
}
