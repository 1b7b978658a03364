package triggers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"reflect"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/server"
	"github.com/onceflow/onceflow/store/sqlite"
	"github.com/onceflow/onceflow/triggers"
	"github.com/onceflow/onceflow/triggers/stdtriggers"
)

// inboxItem is what the program's own source hands the inbox trigger.
type inboxItem struct {
	ID   string
	Body string
	// Taken is closed once the item's run is stored.
	Taken chan struct{}
}

// inboxKind is a trigger kind of the program's own: a workflow file's inbox: block
// names an in-process source of items, each of which starts one run keyed by its id.
type inboxKind struct{ sources map[string]chan inboxItem }

type inboxSettings struct {
	Source string `yaml:"source"`
	kind   *inboxKind
}

func (k *inboxKind) Spec() triggers.Spec {
	return triggers.Spec{Block: "inbox", Trigger: onceflow.TriggerQueue, Summary: "Starts a run for each item of an in-process inbox.",
		Schema:   json.RawMessage(`{"type": "object", "required": ["source"], "additionalProperties": false, "properties": {"source": {"type": "string"}}}`),
		Settings: reflect.TypeFor[inboxSettings]()}
}

func (k *inboxKind) Decode(s block.Settings, _ string) (triggers.Config, error) {
	c := &inboxSettings{kind: k}
	return c, s.Decode(c)
}

func (c *inboxSettings) Walk(w block.Walker) {
	if _, ok := c.kind.sources[c.Source]; !ok {
		w.Problem("source", "no inbox is called %q", c.Source)
	}
}

func (c *inboxSettings) Build(b *triggers.Build) (triggers.Trigger, error) {
	return &inbox{workflow: b.Workflow, items: c.kind.sources[c.Source]}, nil
}

// inbox is the consumer: it starts a run per item and, like every consumer, takes the
// item as done only once Start returned without an error.
type inbox struct {
	workflow string
	items    chan inboxItem
}

func (t *inbox) Workflow() string { return t.workflow }
func (t *inbox) Err() error       { return nil }
func (t *inbox) Run(ctx context.Context, s triggers.Starter) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case it := <-t.items:
			run, err := s.Start(ctx, t.workflow, it.ID, json.RawMessage(it.Body))
			if err != nil {
				return err
			}
			fmt.Println("item", it.ID, "is run", run.ID, "duplicate:", run.Duplicate)
			close(it.Taken)
		}
	}
}

// A program adds a trigger kind of its own to the standard ones — one line — and its
// workflow files use its block; the server runs its consumer beside the engine.
func Example_customKind() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, _ := os.MkdirTemp("", "triggers-example")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "signup.yaml"), []byte(`
name: signup
inbox: {source: signups}
steps:
  - id: welcome
    kind: go
    func: welcome
`), 0o600)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "onceflow.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	signups := make(chan inboxItem)
	trigs, err := stdtriggers.New()
	if err != nil {
		log.Fatal(err)
	}
	if err := trigs.Add(&inboxKind{sources: map[string]chan inboxItem{"signups": signups}}); err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{Store: st, Workflows: []string{dir}, Triggers: trigs,
		Funcs: map[string]onceflow.StepFunc{"welcome": func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }}})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	for _, it := range []inboxItem{
		{ID: "signup-1", Body: `{"email": "ada@example.com"}`},
		{ID: "signup-1", Body: `{"email": "ada@example.com"}`}, // delivered twice
		{ID: "signup-2", Body: `{"email": "grace@example.com"}`},
	} {
		it.Taken = make(chan struct{})
		signups <- it
		<-it.Taken
	}
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// item signup-1 is run 1 duplicate: false
	// item signup-1 is run 1 duplicate: true
	// item signup-2 is run 2 duplicate: false
}
