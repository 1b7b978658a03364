package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store/sqlite"
)

// A Go program embeds onceflow: the workflow files, a step of its own (kind: go), the API
// with a token. A form posted twice under one Idempotency-Key is one run, and its effect
// happens once.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "server-example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "lead.yaml"), []byte(`
name: lead
entity: "lead:{input.id}"
steps:
  - id: score
    kind: go
    func: score
    effect_key: "score:{input.id}"
`), 0o600)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "onceflow.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	tokens, _ := onceflowhttp.ParseTokens("site:ingest:a-long-random-token-0123")
	srv, err := server.New(ctx, server.Config{
		Store:     st,
		Workflows: []string{dir},
		Funcs: map[string]onceflow.StepFunc{"score": func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			fmt.Println("scoring under key", sc.EffectKey)
			return map[string]int{"score": 7}, nil
		}},
		API: &server.APIConfig{Tokens: tokens}, // no Addr: served below through Handler
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	// In production: APIConfig.Addr, and srv.Run(ctx) serves and executes steps.
	api := httptest.NewServer(srv.Handler())
	defer api.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/workflows/lead/runs", strings.NewReader(`{"id": 8812}`))
		req.Header.Set("Authorization", "Bearer a-long-random-token-0123")
		req.Header.Set("Idempotency-Key", "form-8812")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	if _, err := srv.Client().Work(ctx); err != nil { // what Run does continuously
		log.Fatal(err)
	}
	run, _ := srv.Client().GetRun(ctx, 1)
	fmt.Println(run.Entity, run.State)
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// scoring under key score:8812
	// lead:8812 completed
}
