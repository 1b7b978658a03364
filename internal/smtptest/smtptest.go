// Package smtptest is a minimal SMTP server for tests: it accepts every message on a
// loopback port, without TLS or authentication, and keeps the subject of each.
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
	wg       sync.WaitGroup
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
		case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RCPT"), strings.HasPrefix(cmd, "RSET"), strings.HasPrefix(cmd, "NOOP"):
			say("250 ok")
		case cmd == "DATA":
			say("354 go ahead")
			subject, inSubject := "", false
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
				if v, ok := strings.CutPrefix(l, "Subject: "); ok && subject == "" {
					subject, inSubject = strings.TrimSpace(v), true
				} else if inSubject && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) {
					subject += " " + strings.TrimSpace(l) // a folded header line
				} else {
					inSubject = false
				}
			}
			s.mu.Lock()
			s.subjects = append(s.subjects, subject)
			s.mu.Unlock()
			say("250 queued")
		case cmd == "QUIT":
			say("221 bye")
			return
		default:
			say("502 not implemented")
		}
	}
}
