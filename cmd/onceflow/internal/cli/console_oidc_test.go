package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// serve's OpenID Connect flags reach the console's configuration, the client secret from
// the environment only; a missing setting is named with its flag.
func TestConsoleOIDCFlags(t *testing.T) {
	parse := func(args ...string) serveFlags {
		t.Helper()
		var f serveFlags
		cmd := &cobra.Command{Use: "serve"}
		consoleFlags(cmd, &f)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	full := []string{"--ui-oidc-issuer", "https://sso.example.com", "--ui-oidc-client-id", "console",
		"--ui-oidc-redirect-url", "https://ops.example.com/ui/oidc/callback", "--ui-oidc-roles", "ops=admin,growth=admin:website-lead",
		"--ui-oidc-scopes", "email,groups", "--ui-token-sign-in=false"}

	t.Setenv(oidcSecretEnv, "")
	f := parse(full...)
	if _, err := f.console(); err == nil || !strings.Contains(err.Error(), oidcSecretEnv) {
		t.Fatalf("without the secret: %v, want an error naming %s", err, oidcSecretEnv)
	}
	t.Setenv(oidcSecretEnv, "s3cret-from-env")
	c, err := f.console()
	if err != nil {
		t.Fatal(err)
	}
	o := c.OIDC
	if o == nil || o.Issuer != "https://sso.example.com" || o.ClientID != "console" || o.ClientSecret != "s3cret-from-env" ||
		o.RedirectURL != "https://ops.example.com/ui/oidc/callback" || len(o.Roles) != 2 || o.Roles[1].Workflow != "website-lead" ||
		strings.Join(o.Scopes, ",") != "email,groups" || o.RolesClaim != "groups" || !c.NoTokenSignIn {
		t.Fatalf("console config %+v, OIDC %+v", c, o)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--ui-oidc-client-id", "console"}, "--ui-oidc-client-id needs --ui-oidc-issuer"},
		{[]string{"--ui-token-sign-in=false"}, "no way to sign in"},
		{[]string{"--ui-oidc-issuer", "https://sso.example.com", "--ui-oidc-client-id", "c", "--ui-oidc-redirect-url", "https://x/ui/oidc/callback"}, "--ui-oidc-roles"},
		{append(full[:len(full):len(full)], "--ui-oidc-roles", "ops=owner"), "--ui-oidc-roles:"},
	} {
		f := parse(bad.args...)
		if _, err := f.console(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want an error saying %q", bad.args, err, bad.want)
		}
	}
}
