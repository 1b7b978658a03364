// Package smtptest is a minimal SMTP server for tests: it accepts every message on a
// loopback port, without TLS or authentication, and keeps each as it arrived: the
// envelope (MAIL FROM and RCPT TO, as the client wrote them), the text and the subject.
package smtptest

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
)

// Sink is a running test SMTP server.
type Sink struct {
	// Addr is the host:port to give ONCEFLOW_SMTP_ADDR (with ONCEFLOW_SMTP_TLS=none).
	Addr string

	mu       sync.Mutex
	subjects []string
	messages []Message
	replies  []string
	wg       sync.WaitGroup
}

// Drop, as a reply, closes the connection without answering.
const Drop = "drop"

// Reply makes the sink answer the next message, once its text has arrived, with line (such
// as "451 try again later" or "554 refused") instead of accepting it, or close the
// connection without an answer (Drop). The message is kept either way.
func (s *Sink) Reply(line string) {
	s.mu.Lock()
	s.replies = append(s.replies, line)
	s.mu.Unlock()
}

// Message is one accepted message.
type Message struct {
	// From and To are the envelope's paths as the client wrote them, angle brackets
	// included and parameters (BODY=8BITMIME) left out: "<noreply@example.com>".
	From string
	To   []string
	// Data is the message text, CRLF line ends, dots unstuffed.
	Data    string
	Subject string
}

// New starts a sink that stops when the test ends.
func New(t testing.TB) *Sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{Addr: ln.Addr().String()}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

// Count returns how many messages were accepted.
func (s *Sink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subjects)
}

// Messages returns the accepted messages, in order.
func (s *Sink) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Subjects returns the subjects of the accepted messages, in order.
func (s *Sink) Subjects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.subjects...)
}

func (s *Sink) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(line string) { _, _ = c.Write([]byte(line + "\r\n")) }
	say("220 sink ESMTP")
	var msg Message
	path := func(line, prefix string) string { // the path after "MAIL FROM:" or "RCPT TO:", without parameters
		arg := strings.TrimSpace(strings.TrimRight(line, "\r\n")[len(prefix):])
		if i := strings.LastIndexByte(arg, '>'); i >= 0 {
			arg = arg[:i+1]
		}
		return arg
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250-sink")
			say("250 8BITMIME")
		case strings.HasPrefix(cmd, "MAIL FROM:"):
			msg = Message{From: path(line, "MAIL FROM:")}
			say("250 ok")
		case strings.HasPrefix(cmd, "RCPT TO:"):
			msg.To = append(msg.To, path(line, "RCPT TO:"))
			say("250 ok")
		case strings.HasPrefix(cmd, "RSET"), strings.HasPrefix(cmd, "NOOP"):
			say("250 ok")
		case cmd == "DATA":
			say("354 go ahead")
			subject, inSubject := "", false
			var data strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				data.WriteString(strings.TrimPrefix(l, "."))
				if v, ok := strings.CutPrefix(l, "Subject: "); ok && subject == "" {
					subject, inSubject = strings.TrimSpace(v), true
				} else if inSubject && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) {
					subject += " " + strings.TrimSpace(l) // a folded header line
				} else {
					inSubject = false
				}
			}
			msg.Data, msg.Subject = data.String(), subject
			reply := "250 queued"
			s.mu.Lock()
			s.subjects = append(s.subjects, subject)
			s.messages = append(s.messages, msg)
			if len(s.replies) > 0 {
				reply, s.replies = s.replies[0], s.replies[1:]
			}
			s.mu.Unlock()
			msg = Message{}
			if reply == Drop {
				return
			}
			say(reply)
		case cmd == "QUIT":
			say("221 bye")
			return
		default:
			say("502 not implemented")
		}
	}
}
