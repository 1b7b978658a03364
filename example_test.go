package onceflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// A form submission creates one CRM lead and sends one welcome e-mail, although the form
// is submitted twice and the CRM fails once.
func Example() {
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

	crmCalls := 0
	err = client.Register(onceflow.Workflow{
		Name:          "website-lead",
		Entity:        "lead:{input.submission_id}",
		RequiredInput: []string{"submission_id", "email"},
		Steps: []onceflow.Step{
			{
				ID:        "crm",
				EffectKey: "lead-create:{input.submission_id}",
				Retry:     onceflow.RetryPolicy{Initial: 1}, // retry at once, for the example
				Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
					crmCalls++
					if crmCalls == 1 {
						return nil, errors.New("CRM answered 503")
					}
					// A real step sends sc.EffectKey as the request's Idempotency-Key.
					return map[string]any{"lead_id": 77, "key": sc.EffectKey}, nil
				},
			},
			{
				ID:        "welcome",
				Needs:     []string{"crm"},
				EffectKey: "welcome-email:{input.submission_id}",
				Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
					var lead struct {
						LeadID int `json:"lead_id"`
					}
					if err := sc.DecodeOutput("crm", &lead); err != nil {
						return nil, err
					}
					fmt.Println("welcome e-mail sent for lead", lead.LeadID)
					return nil, nil
				},
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	input := map[string]any{"submission_id": 8812, "email": "ana@example.com"}
	first, _ := client.Start(ctx, "website-lead", "form-8812", input)
	again, _ := client.Start(ctx, "website-lead", "form-8812", input) // a double click
	fmt.Println("same run:", first.ID == again.ID, "duplicate:", again.Duplicate)

	// Work executes whatever is due; a long-running process calls Serve instead.
	for {
		if n, err := client.Work(ctx); err != nil || n == 0 {
			break
		}
	}
	run, _ := client.GetRun(ctx, first.ID)
	fmt.Println("run:", run.State, "entity:", run.Entity, "CRM calls:", crmCalls)
	// Output:
	// same run: true duplicate: true
	// welcome e-mail sent for lead 77
	// run: completed entity: lead:8812 CRM calls: 2
}

// A permanent error parks the step for a person, with the reason and the error.
func ExamplePermanentError() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "onceflow-example")
	defer os.RemoveAll(dir)
	st, _ := sqlite.Open(ctx, filepath.Join(dir, "onceflow.db"), sqlite.Options{})
	defer st.Close()
	client, _ := onceflow.New(onceflow.Config{Store: st})
	_ = client.Register(onceflow.Workflow{Name: "notify", Steps: []onceflow.Step{{
		ID: "whatsapp",
		Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
			return nil, onceflow.PermanentError(errors.New("phone number +00 is not valid"))
		},
	}}})
	run, _ := client.Start(ctx, "notify", "order-1001", nil)
	_, _ = client.Work(ctx)

	steps, _ := st.StepListByRun(ctx, run.ID)
	fmt.Println(steps[0].State, steps[0].Reason, "-", steps[0].LastError)
	r, _ := client.GetRun(ctx, run.ID)
	fmt.Println("run:", r.State == store.StateNeedsReview)
	// Output:
	// needs_review permanent_error - phone number +00 is not valid
	// run: true
}
