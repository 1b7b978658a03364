package demo

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"mime"
	"net"
	"net/mail"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// mailbox is a simulated SMTP server. Like most, it cannot deduplicate: it delivers every
// message it accepts, whatever its Message-ID. It counts a delivery as a duplicate when a
// message with the same recipient and subject, or the same Message-ID, was delivered
// before.
//
// Its faults are those of a real mail server: a temporary refusal after the message was
// sent (451, nothing delivered: safe to send again), and, for welcome e-mails only, a
// message accepted and delivered whose reply is lost with the connection. The e-mail step
// cannot tell whether that message went out, and since the server cannot deduplicate it
// parks the step for a person instead of sending it again. (Receipts are spared that fault:
// a receipt's key is shared with every repeated event of the same payment, and a key parked
// for review keeps those runs waiting for the person — correct, but it would keep the demo
// from ending.)
type mailbox struct {
	addr string
	plan faultPlan
	ln   net.Listener
	wg   sync.WaitGroup

	mu       sync.Mutex
	conns    map[net.Conn]bool
	closed   bool
	arrivals map[string]int    // effect key → messages received with it
	byKey    map[string]string // effect key → the delivery it made
	actions  map[string]int    // recipient and subject → deliveries
	seen     map[string]int    // Message-ID → messages received with it
	ids      map[string]int    // Message-ID → deliveries
	stats    DestinationStats
}

// startMailbox listens on a free loopback port.
func startMailbox(plan faultPlan) (*mailbox, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: start smtp: %w", err)
	}
	m := &mailbox{addr: ln.Addr().String(), plan: plan, ln: ln, conns: map[net.Conn]bool{},
		arrivals: map[string]int{}, byKey: map[string]string{}, actions: map[string]int{}, seen: map[string]int{}, ids: map[string]int{}}
	m.stats = DestinationStats{Name: "smtp", Address: m.addr, Faults: map[string]int{}}
	m.wg.Add(1)
	go m.accept()
	return m, nil
}

func (m *mailbox) accept() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			c.Close()
			return
		}
		m.conns[c] = true
		m.wg.Add(1)
		m.mu.Unlock()
		go func() {
			defer m.wg.Done()
			m.serve(c)
			m.mu.Lock()
			delete(m.conns, c)
			m.mu.Unlock()
		}()
	}
}

// close stops accepting, closes open connections and waits for their goroutines.
func (m *mailbox) close() error {
	m.mu.Lock()
	m.closed = true
	for c := range m.conns {
		c.Close()
	}
	m.mu.Unlock()
	err := m.ln.Close()
	m.wg.Wait()
	return err
}

// Stats returns a copy of the counters.
func (m *mailbox) Stats() DestinationStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return sinkStats(m.stats, m.actions)
}

func (m *mailbox) applied() applied {
	m.mu.Lock()
	defer m.mu.Unlock()
	return applied{keys: maps.Clone(m.byKey), actions: maps.Clone(m.actions)}
}

// serve speaks enough SMTP for one client: EHLO, MAIL, RCPT, DATA, RSET, NOOP, QUIT.
func (m *mailbox) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	r := textproto.NewReader(bufio.NewReader(c))
	say := func(line string) bool {
		_, err := c.Write([]byte(line + "\r\n"))
		return err == nil
	}
	if !say("220 mailbox.demo ESMTP") {
		return
	}
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250-mailbox.demo")
			say("250 8BITMIME")
		case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RCPT"), cmd == "RSET", cmd == "NOOP":
			say("250 2.0.0 ok")
		case cmd == "DATA":
			say("354 end data with <CR><LF>.<CR><LF>")
			data, err := r.ReadDotBytes()
			if err != nil {
				return
			}
			reply, hangUp := m.receive(data)
			if hangUp {
				return // delivered, but the client never hears so
			}
			say(reply)
		case cmd == "QUIT":
			say("221 2.0.0 bye")
			return
		default:
			say("502 5.5.1 not implemented")
		}
	}
}

// receive handles one submitted message and returns the reply, or hangUp to drop the
// connection without one.
func (m *mailbox) receive(data []byte) (reply string, hangUp bool) {
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return "554 5.6.0 malformed message", false
	}
	h := msg.Header
	id := strings.Trim(h.Get("Message-ID"), "<> ")
	key := h.Get("X-Onceflow-Effect-Key")
	subject, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
	if err != nil {
		subject = h.Get("Subject")
	}
	to := h.Get("To")
	if list, err := h.AddressList("To"); err == nil {
		addrs := make([]string, len(list))
		for i, a := range list {
			addrs[i] = strings.ToLower(a.Address)
		}
		to = strings.Join(addrs, ", ")
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Requests++
	m.seen[id]++
	if id != "" && m.seen[id] > 1 {
		m.stats.RepeatedKeys++
	}
	f := faultNone
	if key != "" {
		m.arrivals[key]++
		f = m.plan.pick(m.stats.Name, key, m.arrivals[key])
	}
	switch f {
	case faultUnavailable, faultRateLimited:
		m.stats.fault(faultTempFailure)
		return "451 4.3.0 mailbox busy, try again later", false
	case faultDropAfterApply:
		if !strings.HasPrefix(key, "welcome-email:") {
			f = faultNone // see the type's comment
		}
	default:
		f = faultNone
	}
	// Deliver.
	action := "e-mail to " + to + ": " + subject
	if m.actions[action] > 0 || (id != "" && m.ids[id] > 0) {
		m.stats.DuplicateEffects++
	}
	m.actions[action]++
	m.ids[id]++
	if key != "" {
		m.byKey[key] = action
	}
	if f == faultDropAfterApply {
		m.stats.fault(f)
		return "", true
	}
	return "250 2.0.0 queued as " + id, false
}
