package flowfile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/onceflow/onceflow/internal/redact"
)

// SecretSuffixes are the endings of environment variable names whose values are secrets
// wherever a workflow reads them.
var SecretSuffixes = []string{"_TOKEN", "_SECRET", "_KEY", "_PASSWORD"}

// SecretName reports whether an environment variable is secret by its name alone: its
// name ends in one of SecretSuffixes.
func SecretName(name string) bool {
	for _, s := range SecretSuffixes {
		if strings.HasSuffix(strings.ToUpper(name), s) {
			return true
		}
	}
	return false
}

// SecretNames returns, sorted, the environment variables the definition reads whose values
// are secrets and are masked wherever text leaves onceflow:
//
//   - those its secrets: list declares;
//   - those whose names end in _TOKEN, _SECRET, _KEY or _PASSWORD;
//   - a webhook's secret_env, and the variables a step kind or a notify channel reads
//     as a secret (a Slack webhook URL is a credential).
//
// Other variables, such as a destination's base URL in {env.CRM_URL}, are configuration:
// they show in error messages, so that an operator can see where a request went.
func (d *Definition) SecretNames() []string {
	names := map[string]bool{}
	for _, n := range d.Secrets {
		names[n] = true
	}
	for _, n := range d.EnvNames() {
		if SecretName(n) {
			names[n] = true
		}
	}
	for _, u := range d.allUses() {
		if u.tmpl.Secret || u.vars.Secret {
			for _, n := range u.envNames() {
				names[n] = true
			}
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// MaskedValues returns, sorted and without repeats, what a program serving the definition
// must mask of the environment it reads (env looks a variable up): the whole value of
// each variable of SecretNames, and of every other variable the parts that look like
// credentials (redact.CredentialParts: a password, an opaque token in a path segment or a
// query value), so that a webhook URL read from a variable nobody declared secret shows
// its host and fixed words but not its token.
func (d *Definition) MaskedValues(env func(string) (string, bool)) []string {
	secretNames := d.SecretNames()
	secret := map[string]bool{}
	for _, n := range secretNames {
		secret[n] = true
	}
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, n := range append(d.EnvNames(), secretNames...) {
		v, ok := env(n)
		if !ok || v == "" {
			continue
		}
		if secret[n] {
			add(v)
			continue
		}
		for _, p := range redact.CredentialParts(v) {
			add(p)
		}
	}
	sort.Strings(out)
	return out
}

// checkSecrets checks the secrets: list.
func (d *Definition) checkSecrets() Problems {
	var ps Problems
	for i, n := range d.Secrets {
		if !envNameRE.MatchString(n) {
			ps = append(ps, d.problemAt(fmt.Sprintf("$.secrets[%d]", i),
				"secrets: %q is not an environment variable name (A-Z, 0-9, _); list the names of variables, never their values", n))
		}
	}
	return ps
}
