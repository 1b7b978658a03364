package server_test

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/server"
)

// everywhere is a loopback listener that says it listens on every interface, as one opened
// on 0.0.0.0 does.
type everywhere struct{ net.Listener }

func (l everywhere) Addr() net.Addr {
	a := l.Listener.Addr().(*net.TCPAddr)
	return &net.TCPAddr{IP: net.IPv4zero, Port: a.Port}
}

// ConsoleURL names where the console answers: beside the API, on its own listener, with
// the loopback address for a listener on every interface, and "" without a console.
func TestConsoleURL(t *testing.T) {
	dir, st := setup(t, map[string]string{"lead.yaml": leadYAML})
	listen := func() net.Listener {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	for _, tc := range []struct {
		name    string
		api     net.Listener
		console *server.ConsoleConfig
		want    func(api, console net.Addr) string
	}{
		{"beside the API", listen(), &server.ConsoleConfig{}, func(api, _ net.Addr) string { return "http://" + api.String() + "/ui/" }},
		{"on its own listener", listen(), &server.ConsoleConfig{Listener: listen()}, func(_, c net.Addr) string { return "http://" + c.String() + "/ui/" }},
		{"on every interface", everywhere{listen()}, &server.ConsoleConfig{}, func(api, _ net.Addr) string {
			return "http://127.0.0.1:" + strconv.Itoa(api.(*net.TCPAddr).Port) + "/ui/"
		}},
		{"none", listen(), nil, func(net.Addr, net.Addr) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := server.New(context.Background(), server.Config{Store: st, Workflows: []string{dir}, Funcs: map[string]onceflow.StepFunc{"noop": noop},
				API: &server.APIConfig{Listener: tc.api}, Console: tc.console})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			var console net.Addr
			if tc.console != nil && tc.console.Listener != nil {
				console = tc.console.Listener.Addr()
			}
			if got, want := srv.ConsoleURL(), tc.want(tc.api.Addr(), console); got != want {
				t.Errorf("ConsoleURL = %q, want %q", got, want)
			}
		})
	}
}
