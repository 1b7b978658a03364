package cli

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/internal/duration"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/server"
)

// oidcSecretEnv is the variable that holds the console's OpenID Connect client secret: a
// secret is never a flag, which any user of the machine can read in the process list.
const oidcSecretEnv = "ONCEFLOW_OIDC_CLIENT_SECRET"

// consoleOIDCFlags are serve's flags for signing in to the console with OpenID Connect.
type consoleOIDCFlags struct {
	issuer, clientID, redirectURL, rolesClaim, roles, label string
	scopes                                                  []string
	tokenSignIn                                             bool
}

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
	o := &f.oidc
	cmd.Flags().StringVar(&o.issuer, "ui-oidc-issuer", "",
		"issuer URL of an OpenID Connect provider people sign in to the console with (its client secret from "+oidcSecretEnv+")")
	cmd.Flags().StringVar(&o.clientID, "ui-oidc-client-id", "", "the console's client ID at the OpenID Connect provider")
	cmd.Flags().StringVar(&o.redirectURL, "ui-oidc-redirect-url", "",
		"the console's callback as registered at the provider, such as https://ops.example.com/ui/oidc/callback")
	cmd.Flags().StringSliceVar(&o.scopes, "ui-oidc-scopes", []string{"email", "profile"}, "scopes asked for besides openid (add groups where the provider needs it)")
	cmd.Flags().StringVar(&o.rolesClaim, "ui-oidc-roles-claim", "groups", "the ID token's claim that holds a person's roles or groups")
	cmd.Flags().StringVar(&o.roles, "ui-oidc-roles", "",
		"what each value of the roles claim may do: VALUE=read, VALUE=admin or VALUE=admin:WORKFLOW (admin of that workflow only), comma-separated")
	cmd.Flags().StringVar(&o.label, "ui-oidc-label", "", "the provider's name on the sign-in button (default \"single sign-on\")")
	cmd.Flags().BoolVar(&o.tokenSignIn, "ui-token-sign-in", true, "let people sign in to the console with an API token as well (false: OpenID Connect only)")
}

// oidc is the OpenID Connect sign-in the flags ask for: nil without --ui-oidc-issuer.
func (o *consoleOIDCFlags) oidc() (*onceflowui.OIDC, error) {
	if o.issuer == "" {
		for name, v := range map[string]string{"--ui-oidc-client-id": o.clientID, "--ui-oidc-redirect-url": o.redirectURL, "--ui-oidc-roles": o.roles} {
			if v != "" {
				return nil, usagef("%s needs --ui-oidc-issuer", name)
			}
		}
		if !o.tokenSignIn {
			return nil, usagef("--ui-token-sign-in=false needs --ui-oidc-issuer: there would be no way to sign in")
		}
		return nil, nil
	}
	secret := os.Getenv(oidcSecretEnv)
	switch {
	case o.clientID == "":
		return nil, usagef("--ui-oidc-issuer needs --ui-oidc-client-id")
	case o.redirectURL == "":
		return nil, usagef("--ui-oidc-issuer needs --ui-oidc-redirect-url, the console's callback as registered at the provider")
	case secret == "":
		return nil, usagef("--ui-oidc-issuer needs the client secret in %s", oidcSecretEnv)
	case strings.TrimSpace(o.roles) == "":
		return nil, usagef("--ui-oidc-issuer needs --ui-oidc-roles, such as ops=admin,finance=read: without it nobody may sign in")
	}
	roles, err := onceflowui.ParseOIDCRoles(o.roles)
	if err != nil {
		return nil, usagef("--ui-oidc-roles: %s", strings.TrimPrefix(err.Error(), "onceflowui: "))
	}
	return &onceflowui.OIDC{Issuer: o.issuer, ClientID: o.clientID, ClientSecret: secret, RedirectURL: o.redirectURL,
		Scopes: o.scopes, RolesClaim: o.rolesClaim, Roles: roles, Label: o.label}, nil
}

// console is the console the flags ask for: nil for --ui-addr off, at /ui/ on the API
// without --ui-addr, else on that address.
func (f *serveFlags) console() (*server.ConsoleConfig, error) {
	if f.uiAddr == "off" {
		return nil, nil
	}
	o, err := f.oidc.oidc()
	if err != nil {
		return nil, err
	}
	return &server.ConsoleConfig{Addr: f.uiAddr, SecureCookies: f.uiSecureCookies, SessionTTL: f.uiSession, SessionIdle: f.uiIdle,
		OIDC: o, NoTokenSignIn: !f.oidc.tokenSignIn}, nil
}
