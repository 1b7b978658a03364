package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/internal/redact"
	"github.com/onceflow/onceflow/metrics"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/steps/emailstep"
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

// redaction collects what the app must never write: the values of the secret environment
// variables the workflow files read (flowfile.Definition.SecretNames: declared in
// secrets:, named *_TOKEN, *_SECRET, *_KEY or *_PASSWORD, webhook and Slack webhook
// secrets) and the parts of the other variables that look like credentials
// (flowfile.Definition.MaskedValues), the SMTP password, the
// secrets the command passes (API tokens, the database password), and the personal-data
// fields of --redact-fields and of each file's redact list.
func (c appConfig) redaction(defs []*flowfile.Definition) (onceflow.Redaction, *redact.Policy, error) {
	secrets := append([]string(nil), c.secrets...)
	if v, ok := c.env(emailstep.EnvPassword); ok && v != "" {
		secrets = append(secrets, v)
	}
	for _, d := range defs {
		secrets = append(secrets, d.MaskedValues(c.env)...)
	}
	sort.Strings(secrets)
	red := onceflow.Redaction{Secrets: secrets, Fields: c.redact}
	policy, err := redact.New(red.Secrets, red.Fields)
	if err != nil {
		return red, nil, usagef("--redact-fields: %v", err)
	}
	for _, d := range defs {
		if err := policy.SetWorkflow(d.Name, d.Redact); err != nil {
			return red, nil, fmt.Errorf("%s: %w", d.File(), err)
		}
	}
	return red, policy, nil
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

// maskedLogger returns log with the policy's secrets masked; nil stays nil.
func maskedLogger(log *slog.Logger, policy *redact.Policy) *slog.Logger {
	if log == nil {
		return nil
	}
	return slog.New(redact.Handler(log.Handler(), policy.Secrets()))
}

// handler returns the API and webhook endpoints of the app, with its metrics, accepting
// tokens: onceflowhttp.NewHandler, as a Go program embedding onceflow would call it. The
// handler masks what the app's client masks.
func (a *app) handler(tokens []onceflowhttp.Token) (http.Handler, error) {
	opts := onceflowhttp.Options{Workflows: a.defs, Tokens: tokens, Env: a.env, Logger: a.log, MaxDepth: a.maxDepth}
	if len(a.triggers) > 0 {
		opts.Ready = a.queuesReady
	}
	opts.Reload = a.reloadWorkflows
	if a.metrics != nil {
		opts.Metrics = a.metrics
		if a.metricsOnAPI {
			opts.MetricsHandler = a.metrics.Handler()
		}
	}
	h, err := onceflowhttp.NewHandler(a.client, opts)
	if err != nil {
		return nil, err
	}
	a.reload.setServer(h, tokens)
	return wrapHandler(h), nil
}

// wrapHandler wraps the handler of every app; tests set it to check each request and
// answer against the OpenAPI document.
var wrapHandler = func(h http.Handler) http.Handler { return h }

// serveMetrics serves m at /metrics on addr, holding at most maxConns connections, until
// stop is called. The address joins own: steps never reach it.
func serveMetrics(ctx context.Context, own *listeners, addr string, maxConns int, m *metrics.Metrics, log *slog.Logger) (stop func(), err error) {
	ln, err := own.listen(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	hs := onceflowhttp.HTTPServer(mux)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serveLimited(hs, ln, maxConns); err != nil {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
		<-done
	}, nil
}
