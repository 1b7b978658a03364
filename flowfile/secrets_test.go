package flowfile

import (
	"slices"
	"testing"
)

// The documented rule: a variable is secret when the file's secrets: lists it, when its
// name ends in _TOKEN, _SECRET, _KEY or _PASSWORD, or when it is a webhook's secret or a
// Slack webhook; any other variable, such as a base URL, is configuration.
func TestSecretNames(t *testing.T) {
	src := `name: rule
secrets: [HOOK_URL]
webhook:
  name: rule
  scheme: standard-webhooks
  secret_env: [SIGNING]
notify:
  slack: {webhook: "{env.OPS_SLACK}"}
steps:
  - id: call
    kind: http
    effect_key: "call:{input.id}"
    http:
      url: "{env.CRM_URL}/x?k={env.CRM_KEY}"
      headers: {Authorization: "Bearer {env.CRM_TOKEN}", X-Sig: "{env.APP_SECRET}", X-Pass: "{env.DB_PASSWORD}", X-Hook: "{env.HOOK_URL}", X-Region: "{env.REGION}"}
`
	d, ps := testReader.Parse("rule.yaml", []byte(src))
	if ps != nil {
		t.Fatal(ps)
	}
	want := []string{"APP_SECRET", "CRM_KEY", "CRM_TOKEN", "DB_PASSWORD", "HOOK_URL", "OPS_SLACK", "SIGNING"}
	if got := d.SecretNames(); !slices.Equal(got, want) {
		t.Fatalf("SecretNames = %q, want %q (CRM_URL and REGION are configuration)", got, want)
	}
	for name, secret := range map[string]bool{"X_TOKEN": true, "x_password": true, "API_KEY": true, "CRM_URL": false, "KEYRING": false, "TOKEN_URL": false} {
		if SecretName(name) != secret {
			t.Errorf("SecretName(%q) = %v, want %v", name, !secret, secret)
		}
	}
}
