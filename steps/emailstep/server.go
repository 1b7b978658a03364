package emailstep

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// TLS modes of a Server.
const (
	// TLSAuto upgrades the connection with STARTTLS when the server offers it (the zero
	// value). Credentials are only sent over TLS, or to localhost.
	TLSAuto = ""
	// TLSNone never uses TLS. Credentials are refused unless the server is localhost.
	TLSNone = "none"
	// TLSStartTLS requires STARTTLS: a server that does not offer it is a permanent error.
	TLSStartTLS = "starttls"
	// TLSImplicit speaks TLS from the first byte (SMTPS, usually port 465).
	TLSImplicit = "tls"
)

// Environment variables read by ServerFromEnv.
const (
	EnvAddr     = "ONCEFLOW_SMTP_ADDR"
	EnvUsername = "ONCEFLOW_SMTP_USERNAME"
	EnvPassword = "ONCEFLOW_SMTP_PASSWORD"
	EnvTLS      = "ONCEFLOW_SMTP_TLS"
)

// Server says where and how messages are submitted.
type Server struct {
	// Addr is the server's host:port, e.g. "smtp.example.com:587". Required.
	Addr string
	// Username and Password, when set, authenticate with AUTH PLAIN. They are sent only
	// over TLS, or to localhost.
	Username string
	Password string
	// TLS is TLSAuto (""), TLSNone, TLSStartTLS or TLSImplicit.
	TLS string
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool
}

// ServerFromEnv reads a Server from ONCEFLOW_SMTP_ADDR, ONCEFLOW_SMTP_USERNAME,
// ONCEFLOW_SMTP_PASSWORD and ONCEFLOW_SMTP_TLS; getenv is usually os.Getenv. The error
// names the variable at fault, never the password.
func ServerFromEnv(getenv func(string) string) (Server, error) {
	srv := Server{
		Addr:     strings.TrimSpace(getenv(EnvAddr)),
		Username: getenv(EnvUsername),
		Password: getenv(EnvPassword),
		TLS:      strings.ToLower(strings.TrimSpace(getenv(EnvTLS))),
	}
	switch {
	case srv.Addr == "":
		return Server{}, fmt.Errorf("%s is not set: set it to the SMTP server's host:port, e.g. smtp.example.com:587", EnvAddr)
	case srv.Username != "" && srv.Password == "":
		return Server{}, fmt.Errorf("%s is set but %s is not", EnvUsername, EnvPassword)
	case srv.Username == "" && srv.Password != "":
		return Server{}, fmt.Errorf("%s is set but %s is not", EnvPassword, EnvUsername)
	}
	if err := srv.checkAddr(); err != nil {
		return Server{}, fmt.Errorf("%s: %w", EnvAddr, err)
	}
	if err := srv.checkTLS(); err != nil {
		return Server{}, fmt.Errorf("%s: %w", EnvTLS, err)
	}
	if err := srv.check(); err != nil {
		return Server{}, err
	}
	return srv, nil
}

// check validates the settings; its errors never contain the password.
func (s Server) check() error {
	if s.Addr == "" {
		return errors.New("server address is required (host:port, e.g. smtp.example.com:587)")
	}
	if err := s.checkAddr(); err != nil {
		return fmt.Errorf("server address: %w", err)
	}
	if err := s.checkTLS(); err != nil {
		return fmt.Errorf("server TLS: %w", err)
	}
	if (s.Username == "") != (s.Password == "") {
		return errors.New("server credentials need both a username and a password")
	}
	host, _, _ := net.SplitHostPort(s.Addr)
	if s.Username != "" && s.TLS == TLSNone && !isLocalhost(host) {
		return fmt.Errorf("refusing to send SMTP credentials unencrypted to %s: use TLS %q or %q", host, TLSStartTLS, TLSImplicit)
	}
	return nil
}

func (s Server) checkAddr() error {
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port (e.g. smtp.example.com:587)", s.Addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", s.Addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", s.Addr, port)
	}
	return nil
}

func (s Server) checkTLS() error {
	switch s.TLS {
	case TLSAuto, TLSNone, TLSStartTLS, TLSImplicit:
		return nil
	}
	return fmt.Errorf("%q is not one of %q, %q or %q (or empty: STARTTLS when the server offers it)", s.TLS, TLSNone, TLSStartTLS, TLSImplicit)
}

// secrets returns the strings that reveal the credentials: the password and the AUTH
// PLAIN response that carries it.
func (s Server) secrets() secrets {
	if s.Password == "" {
		return nil
	}
	return secrets{base64.StdEncoding.EncodeToString([]byte("\x00" + s.Username + "\x00" + s.Password)), s.Password}
}

// isLocalhost matches net/smtp's rule for sending credentials without TLS.
func isLocalhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
