package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/server"
)

// consoleFlags are serve's flags for the web console.
func consoleFlags(cmd *cobra.Command, f *serveFlags) {
	cmd.Flags().StringVar(&f.uiAddr, "ui-addr", "",
		"address to serve the web console on, at /ui/ (default: the API's own address); \"off\" serves no console")
	cmd.Flags().BoolVar(&f.uiSecureCookies, "ui-secure-cookies", false,
		"mark the console's session cookie Secure although the connection is plain HTTP (behind a TLS-terminating proxy)")
	fl := duration.NewFlag(&f.uiSession, 8*time.Hour)
	fl.Positive = true
	cmd.Flags().Var(fl, "ui-session", "how long a console sign-in lasts at most, such as 8h or 1d")
	idle := duration.NewFlag(&f.uiIdle, time.Hour)
	idle.Positive = true
	cmd.Flags().Var(idle, "ui-idle", "how long a console sign-in lasts without a request, such as 30m")
}

// console is the console the flags ask for: nil for --ui-addr off, at /ui/ on the API
// without --ui-addr, else on that address.
func (f *serveFlags) console() *server.ConsoleConfig {
	if f.uiAddr == "off" {
		return nil
	}
	return &server.ConsoleConfig{Addr: f.uiAddr, SecureCookies: f.uiSecureCookies, SessionTTL: f.uiSession, SessionIdle: f.uiIdle}
}
