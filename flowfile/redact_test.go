package flowfile

import (
	"slices"
	"strings"
	"testing"
)

// EnvNames finds every environment variable a file reads: {env.NAME} in any template, and
// the variables named by settings ending in _env.
func TestEnvNames(t *testing.T) {
	src := `name: signup
redact: [email, customer.name]
webhook:
  name: signup
  scheme: standard-webhooks
  secret_env: [HOOK_SECRET, HOOK_SECRET_OLD]
steps:
  - id: crm
    kind: http
    http:
      url: "{env.CRM_URL}/leads?key={env.CRM-KEY}"
      headers: {Authorization: "Bearer {env.CRM_TOKEN}"}
      body: {nested: [{token: "{env.DEEP_TOKEN}"}], email: "{input.email}", literal: "{{env.NOT_A_FIELD}}x"}
      verify: {url: "{env.VERIFY_URL}/x"}
  - id: welcome
    kind: email
    needs: [crm]
    email: {from: "{env.MAIL_FROM}", to: "{input.email}", subject: "Hi"}
`
	d, ps := testReader.Parse("signup.yaml", []byte(src))
	if ps != nil {
		t.Fatal(ps)
	}
	got := d.EnvNames()
	want := []string{"CRM-KEY", "CRM_TOKEN", "CRM_URL", "DEEP_TOKEN", "HOOK_SECRET", "HOOK_SECRET_OLD", "MAIL_FROM", "NOT_A_FIELD", "VERIFY_URL"}
	if !slices.Equal(got, want) {
		t.Errorf("EnvNames = %q, want %q", got, want)
	}
	if !slices.Equal(d.Redact, []string{"email", "customer.name"}) {
		t.Errorf("Redact = %q", d.Redact)
	}
}

// A redact entry that is not a field path is reported at its line.
func TestRedactFieldIsChecked(t *testing.T) {
	src := "name: w\nredact: [email, \"customer..name\"]\nsteps:\n  - id: a\n    kind: go\n    func: f\n"
	_, ps := testReader.Parse("w.yaml", []byte(src))
	if len(ps) != 1 || !strings.HasPrefix(ps[0].String(), "w.yaml:2:") || !strings.Contains(ps[0].Message, "customer..name") {
		t.Fatalf("problems %v, want one at line 2 naming customer..name", ps)
	}
}
