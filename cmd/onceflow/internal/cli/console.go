package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
)

// consoleFlags are serve's flags for the web console.
func consoleFlags(cmd *cobra.Command, f *serveFlags) {
	cmd.Flags().StringVar(&f.uiAddr, "ui-addr", "",
		"address to serve the web console on, at /ui/ (default: the API's own address); \"off\" serves no console")
	cmd.Flags().BoolVar(&f.uiSecureCookies, "ui-secure-cookies", false,
		"mark the console's session cookie Secure although the connection is plain HTTP (behind a TLS-terminating proxy)")
	fl := duration.NewFlag(&f.uiSession, 8*time.Hour)
	fl.Positive = true
	cmd.Flags().Var(fl, "ui-session", "how long a console sign-in lasts, such as 8h or 1d")
}

// startConsole builds the web console of the app. With --ui-addr it serves it on that
// address until stop is called; otherwise it is mounted at /ui/ beside the API (a.ui).
func (a *app) startConsole(ctx context.Context, f serveFlags, tokens []onceflowhttp.Token) (stop func(), err error) {
	stop = func() {}
	if f.uiAddr == "off" {
		return stop, nil
	}
	ui, err := onceflowui.New(onceflowui.Config{Client: a.client, Tokens: tokens, Logger: a.log,
		SecureCookies: f.uiSecureCookies, SessionTTL: f.uiSession})
	if err != nil {
		return nil, err
	}
	if f.uiAddr == "" {
		a.ui = ui
		return stop, nil
	}
	ln, err := a.listeners.listen(f.uiAddr)
	if err != nil {
		return nil, fmt.Errorf("--ui-addr: %w", err)
	}
	_, maxConns := connLimits(f.maxConns)
	hs := onceflowhttp.HTTPServer(ui)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serveLimited(hs, ln, maxConns); err != nil {
			a.log.Error("console server stopped", "error", err)
		}
	}()
	a.log.Info("serving the web console", "addr", "http://"+ln.Addr().String()+"/ui/")
	return func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
		<-done
	}, nil
}

// withConsole mounts the app's console, if it has one on the API's address, beside h.
func (a *app) withConsole(h http.Handler) http.Handler {
	if a.ui == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", a.ui)
	mux.Handle("/ui", a.ui)
	mux.Handle("/", h)
	return mux
}
