package flowfile_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store/sqlite"
)

// A program that embeds onceflow registers Go functions by name and uses them from
// workflow files with kind: go.
func ExampleBuilder() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "flowfile-example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "loyalty.yaml"), []byte(`
name: loyalty
entity: "customer:{input.customer_id}"
steps:
  - id: award_points
    kind: go
    func: award-points
    effect_key: "points:{input.order_id}"
`), 0o600)

	st, _ := sqlite.Open(ctx, filepath.Join(dir, "onceflow.db"), sqlite.Options{})
	defer st.Close()
	kinds, err := stdsteps.New(stdsteps.Options{Store: st, Env: os.LookupEnv, Funcs: map[string]onceflow.StepFunc{
		"award-points": func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			fmt.Println("awarding points under key", sc.EffectKey)
			return map[string]int{"points": 10}, nil
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer kinds.Close()
	defs, err := (&flowfile.Reader{Kinds: kinds}).LoadDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	workflows, err := flowfile.NewBuilder(flowfile.BuildOptions{Store: st, Env: os.LookupEnv}).Workflows(defs)
	if err != nil {
		log.Fatal(err)
	}
	client, _ := onceflow.New(onceflow.Config{Store: st})
	for _, w := range workflows {
		if err := client.Register(w); err != nil {
			log.Fatal(err)
		}
	}
	run, _ := client.Start(ctx, "loyalty", "order-1001", map[string]any{"customer_id": 7, "order_id": 1001})
	_, _ = client.Work(ctx)
	run, _ = client.GetRun(ctx, run.ID)
	fmt.Println(run.Entity, run.State)
	// Output:
	// awarding points under key points:1001
	// customer:7 completed
}
