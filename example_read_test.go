package onceflow_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store/sqlite"
)

// What a front-end shows of a run is read through the client, masked by its policy: the
// input's e-mail address, a personal-data field of the workflow, and the value wherever it
// appears in text, such as a destination's refusal. An operator who needs the data reads
// it unmasked, and the audit trail records who did.
func ExampleClient_RunGet() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "onceflow.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	err = client.Register(onceflow.Workflow{
		Name: "newsletter", Redact: []string{"email"},
		Steps: []onceflow.Step{{ID: "subscribe", EffectKey: "subscribe:{input.id}", Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			var in struct{ Email string }
			if err := sc.DecodeInput(&in); err != nil {
				return nil, err
			}
			return map[string]any{"list": "weekly", "confirmation_sent_to": in.Email}, nil
		}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	run, err := client.Start(ctx, "newsletter", "form-1", map[string]any{"id": 1, "email": "ada@example.com"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Work(ctx); err != nil {
		log.Fatal(err)
	}

	d, err := client.RunGet(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s: input %s, output %s\n", d.Steps[0].Name, d.Steps[0].State, d.Run.Input, d.Steps[0].Output)

	raw, err := client.Unmasked("cli:ana").RunGet(ctx, run.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("unmasked: input %s\n", raw.Run.Input)
	events, err := client.Audit(ctx, onceflow.AuditQuery{RunID: run.ID})
	if err != nil {
		log.Fatal(err)
	}
	last := events[len(events)-1]
	fmt.Println(last.Type, last.Actor, string(last.Detail))
	// Output:
	// subscribe completed: input {"email":"[redacted]","id":1}, output {"confirmation_sent_to":"[redacted]","list":"weekly"}
	// unmasked: input {"email":"ada@example.com","id":1}
	// data.unmasked cli:ana {"read":"run 1"}
}
