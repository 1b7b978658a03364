package cli

import (
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow/onceflowhttp"
)

// envRedactFields is the environment variable --redact-fields defaults to.
const envRedactFields = "ONCEFLOW_REDACT_FIELDS"

// observeFlags are the metrics and redaction flags of the commands that execute steps.
func observeFlags(cmd *cobra.Command, f *serveFlags) {
	cmd.Flags().StringVar(&f.metricsAddr, "metrics-addr", "",
		"address to serve Prometheus metrics on, at /metrics (serve: default the API's own address)")
	var def []string
	for _, s := range strings.Split(os.Getenv(envRedactFields), ",") {
		if s = strings.TrimSpace(s); s != "" {
			def = append(def, s)
		}
	}
	cmd.Flags().StringSliceVar(&f.redact, "redact-fields", def,
		"personal-data fields masked in logs, audit details and API answers of every workflow, e.g. email,customer.name (env "+envRedactFields+")")
}

// processSecrets are the secrets of the command line and environment that no workflow
// file names: the API tokens and the database password.
func processSecrets(loc dbLocation, tokens []onceflowhttp.Token) []string {
	var out []string
	for _, t := range tokens {
		out = append(out, t.Secret)
	}
	if loc.Scheme == "postgres" {
		if u, err := url.Parse(loc.ConnString); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				out = append(out, pw)
			}
		}
	}
	return out
}
