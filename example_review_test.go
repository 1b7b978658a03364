package onceflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store/sqlite"
)

// A welcome e-mail is refused because the address was mistyped. A person corrects the
// address and replays the run: the CRM lead, already created, is not created again.
func ExampleClient_ReviewReplay() {
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
	leads, mails := 0, 0
	err = client.Register(onceflow.Workflow{
		Name: "website-lead", Entity: "lead:{input.submission_id}", RequiredInput: []string{"submission_id", "email"},
		Steps: []onceflow.Step{
			{ID: "crm", EffectKey: "lead-create:{input.submission_id}", Do: func(context.Context, *onceflow.StepContext) (any, error) {
				leads++
				return map[string]any{"lead_id": 77}, nil
			}},
			{ID: "welcome", Needs: []string{"crm"}, EffectKey: "welcome-email:{input.submission_id}", Do: func(_ context.Context, sc *onceflow.StepContext) (any, error) {
				var in struct{ Email string }
				if err := sc.DecodeInput(&in); err != nil {
					return nil, err
				}
				if !strings.Contains(in.Email, "@") {
					return nil, onceflow.PermanentError(errors.New("no such mailbox"))
				}
				mails++
				return nil, nil
			}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	run, err := client.Start(ctx, "website-lead", "form-8812", map[string]any{"submission_id": 8812, "email": "ada.example.com"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Work(ctx); err != nil {
		log.Fatal(err)
	}
	items, _ := client.ReviewList(ctx, onceflow.ReviewFilter{})
	fmt.Printf("waiting: %s (%s)\n", items[0].Step, items[0].Reason)

	req := onceflow.ReplayRequest{RunID: run.ID, Step: "welcome", MergePatch: json.RawMessage(`{"email": "ada@example.com"}`),
		Actor: "alice", Note: "typo confirmed by phone"}
	plan, err := client.ReviewPreview(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range plan.Steps {
		fmt.Printf("preview: %s %s\n", s.Step, s.Action)
	}
	if _, err := client.ReviewReplay(ctx, req); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Work(ctx); err != nil {
		log.Fatal(err)
	}
	r, _ := client.GetRun(ctx, run.ID)
	fmt.Printf("run %s; leads created %d, e-mails sent %d\n", r.State, leads, mails)

	// The step is completed now: an action on it is refused, and changes nothing.
	_, err = client.ReviewAbandon(ctx, onceflow.ReviewAction{RunID: run.ID, Step: "welcome", Actor: "alice"})
	fmt.Println(errors.Is(err, onceflow.ErrNotInReview))
	// Output:
	// waiting: welcome (permanent_error)
	// preview: crm kept
	// preview: welcome run
	// run completed; leads created 1, e-mails sent 1
	// true
}
