package onceflowhttp_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// A Go program registers its own step function, builds the workflow file that uses it
// (kind: go), and serves the same API and webhooks as onceflow serve.
func ExampleNewHandler() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "onceflowhttp-example")
	defer os.RemoveAll(dir)

	st, err := sqlite.Open(ctx, filepath.Join(dir, "onceflow.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	kinds, err := stdsteps.New(stdsteps.Options{Store: st, Env: os.LookupEnv, Funcs: map[string]onceflow.StepFunc{
		"deploy": func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			fmt.Println("deploying under key", sc.EffectKey)
			return map[string]string{"status": "deployed"}, nil
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer kinds.Close()
	trigs, err := stdtriggers.New()
	if err != nil {
		log.Fatal(err)
	}
	def, problems := (&flowfile.Reader{Kinds: kinds, Triggers: trigs}).Parse("push.yaml", []byte(`
name: repo-push
entity: "repo:{input.repository}"
webhook:
  name: github
  scheme: github
  secret_env: [GITHUB_WEBHOOK_SECRET]
  event_id: "{input.after}"
steps:
  - id: deploy
    kind: go
    func: deploy
    effect_key: "deploy:{input.after}"
`))
	if problems != nil {
		log.Fatal(problems)
	}
	workflows, err := flowfile.NewBuilder(flowfile.BuildOptions{Store: st, Env: os.LookupEnv}).Workflows([]*flowfile.Definition{def})
	if err != nil {
		log.Fatal(err)
	}
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	for _, w := range workflows {
		if err := client.Register(w); err != nil {
			log.Fatal(err)
		}
	}

	const secret = "a-long-random-webhook-secret"
	hooks, err := flowfile.Triggers([]*flowfile.Definition{def}, flowfile.TriggerOptions{
		Env: func(name string) (string, bool) {
			return secret, name == "GITHUB_WEBHOOK_SECRET" // in production: os.LookupEnv
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	h, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{
		Receivers: triggers.Receivers(hooks),
		Tokens:    []onceflowhttp.Token{{Name: "ops", Secret: "ops-token-0123456789", Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeAdmin}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	// In production: hs := onceflowhttp.HTTPServer(h); hs.Serve(onceflowhttp.LimitListener(hs, ln, 0)) and go client.Serve(ctx).
	srv := httptest.NewServer(h)
	defer srv.Close()

	// GitHub delivers the same push twice; one run is started.
	body := `{"repository": "shop", "after": "9f3c2e1"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/github", strings.NewReader(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		req.Header.Set("X-GitHub-Delivery", "delivery-72d3162e")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(answer))
	}
	if _, err := client.Work(ctx); err != nil { // what client.Serve does continuously
		log.Fatal(err)
	}

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/workflows", nil)
	req.Header.Set("Authorization", "Bearer ops-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(string(list))
	run, _ := client.GetRun(ctx, 1)
	fmt.Println(run.Entity, run.State)
	// Output:
	// 200 {"duplicate":false,"event_id":"9f3c2e1","run_id":1,"status":"accepted"}
	// 200 {"duplicate":true,"event_id":"9f3c2e1","run_id":1,"status":"accepted"}
	// deploying under key deploy:9f3c2e1
	// {"workflows":[{"name":"repo-push","entity":"repo:{input.repository}","steps":["deploy"],"webhook":{"name":"github","path":"/hooks/github","scheme":"github"},"links":{"runs":"/v1/runs?workflow=repo-push"}}]}
	// repo:shop completed
}
