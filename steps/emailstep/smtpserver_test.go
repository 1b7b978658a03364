package emailstep

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"math/big"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault replies. Any configured reply may also be one of these actions.
const (
	drop  = "drop"  // close the connection without a word
	stall = "stall" // never answer (until the server stops)
)

// serverConfig says how the test server behaves. Empty replies are the happy ones.
type serverConfig struct {
	greeting  string // instead of "220 …"
	authReply string // instead of "235 …"
	mailReply string // instead of "250 …" to MAIL
	rcptReply string // instead of "250 …" to RCPT
	afterData string // instead of "250 …" after the message
	noAuth    bool   // offer no AUTH
	startTLS  *tls.Config
	tls       *tls.Config // implicit TLS
}

// delivery is one message as the server received it.
type delivery struct {
	from string
	rcpt []string
	data string
	tls  bool
}

// smtpServer is an in-process SMTP server speaking enough of the protocol for one client
// session per connection, with configurable faults. It stops at the end of the test.
type smtpServer struct {
	addr string
	cfg  serverConfig
	ln   net.Listener
	quit chan struct{}
	// stalled receives a value each time the server starts stalling.
	stalled chan string
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	dials int
	msgs  []delivery
	auths []string
}

func startServer(t *testing.T, cfg serverConfig) *smtpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{addr: ln.Addr().String(), cfg: cfg, ln: ln, quit: make(chan struct{}),
		stalled: make(chan string, 16), conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.stop)
	return s
}

func (s *smtpServer) stop() {
	close(s.quit)
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *smtpServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.dials++
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *smtpServer) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.msgs...)
}

func (s *smtpServer) authsSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

func (s *smtpServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dials
}

// serve speaks SMTP on one connection.
func (s *smtpServer) serve(raw net.Conn) {
	defer s.wg.Done()
	defer func() {
		raw.Close()
		s.mu.Lock()
		delete(s.conns, raw)
		s.mu.Unlock()
	}()
	var conn net.Conn = raw
	secure := s.cfg.tls != nil
	if secure {
		conn = tls.Server(raw, s.cfg.tls)
	}
	tp := textproto.NewConn(conn)
	// reply sends want, or the happy reply when want is empty; false ends the session.
	reply := func(want, happy string) bool {
		switch want {
		case "":
			want = happy
		case drop:
			return false
		case stall:
			select {
			case s.stalled <- happy:
			case <-s.quit:
				return false
			}
			<-s.quit
			return false
		}
		return tp.PrintfLine("%s", want) == nil
	}
	if !reply(s.cfg.greeting, "220 mail.test ESMTP test server") {
		return
	}
	var d delivery
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			lines := []string{"250-mail.test greets " + arg}
			if !s.cfg.noAuth {
				lines = append(lines, "250-AUTH PLAIN")
			}
			if s.cfg.startTLS != nil && !secure {
				lines = append(lines, "250-STARTTLS")
			}
			lines = append(lines, "250 8BITMIME")
			for _, l := range lines {
				if tp.PrintfLine("%s", l) != nil {
					return
				}
			}
		case "HELO", "NOOP", "RSET":
			if !reply("", "250 OK") {
				return
			}
		case "STARTTLS":
			if s.cfg.startTLS == nil || secure {
				if !reply("", "502 5.5.1 not now") {
					return
				}
				continue
			}
			if !reply("", "220 2.0.0 go ahead") {
				return
			}
			tc := tls.Server(raw, s.cfg.startTLS)
			if tc.Handshake() != nil {
				return
			}
			tp, secure = textproto.NewConn(tc), true
		case "AUTH":
			mech, ir, _ := strings.Cut(arg, " ")
			if !strings.EqualFold(mech, "PLAIN") {
				if !reply("", "504 5.5.4 unknown mechanism") {
					return
				}
				continue
			}
			if ir == "" {
				if !reply("", "334 ") {
					return
				}
				if ir, err = tp.ReadLine(); err != nil {
					return
				}
			}
			cred, _ := base64.StdEncoding.DecodeString(ir)
			s.mu.Lock()
			s.auths = append(s.auths, string(cred))
			s.mu.Unlock()
			if !reply(s.cfg.authReply, "235 2.7.0 authenticated") {
				return
			}
		case "MAIL":
			d = delivery{from: strings.TrimPrefix(arg, "FROM:"), tls: secure}
			if !reply(s.cfg.mailReply, "250 2.1.0 OK") {
				return
			}
		case "RCPT":
			d.rcpt = append(d.rcpt, strings.TrimPrefix(arg, "TO:"))
			if !reply(s.cfg.rcptReply, "250 2.1.5 OK") {
				return
			}
		case "DATA":
			if !reply("", "354 end data with <CR><LF>.<CR><LF>") {
				return
			}
			body, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			d.data = string(body)
			s.mu.Lock()
			s.msgs = append(s.msgs, d)
			n := len(s.msgs)
			s.mu.Unlock()
			if !reply(s.cfg.afterData, "250 2.0.0 OK: queued as Q"+strings.Repeat("1", n)) {
				return
			}
		case "QUIT":
			reply("", "221 2.0.0 bye")
			return
		default:
			if !reply("", "502 5.5.2 command not recognised") {
				return
			}
		}
	}
}

// testCert returns a self-signed certificate for 127.0.0.1 and mail.test.
func testCert(t *testing.T) *tls.Config {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mail.test"},
		DNSNames:     []string{"mail.test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}}}
}
