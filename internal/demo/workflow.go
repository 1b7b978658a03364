package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/onceflow/onceflow"
)

// WorkflowName is the workflow the demo registers.
const WorkflowName = "website-lead"

// Form is a website contact form: the input of a website-lead run.
type Form struct {
	SubmissionID string `json:"submission_id"`
	Name         string `json:"name"`
	Email        string `json:"email"`
	Phone        string `json:"phone"`
}

// retryPolicy is short so that the demo finishes in seconds.
var retryPolicy = onceflow.RetryPolicy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond, MaxAttempts: 8}

// leadWorkflow builds the website-lead workflow against the given destinations: create the
// lead in the CRM, then, each once the lead exists, send a welcome e-mail, a chat notice
// and create a sales task.
func leadWorkflow(ds *destinations, p *poster) onceflow.Workflow {
	step := func(id, key, dest string, request func(sc *onceflow.StepContext) (string, any, error), needs ...string) onceflow.Step {
		return onceflow.Step{
			ID:        id,
			Needs:     needs,
			EffectKey: key,
			Retry:     retryPolicy,
			Timeout:   10 * time.Second,
			// The request is the fingerprint: a key reused with a different request (a
			// resubmitted form with corrected data) goes to review instead of being skipped.
			Fingerprint: func(sc *onceflow.StepContext) (any, error) {
				_, body, err := request(sc)
				return body, err
			},
			Do: func(ctx context.Context, sc *onceflow.StepContext) (any, error) {
				url, body, err := request(sc)
				if err != nil {
					return nil, err
				}
				return p.post(ctx, sc, dest, url, body)
			},
		}
	}
	return onceflow.Workflow{
		Name:          WorkflowName,
		Entity:        "lead:{input.submission_id}",
		RequiredInput: []string{"submission_id", "name", "email"},
		Steps: []onceflow.Step{
			step("crm", "lead-create:{input.submission_id}", "crm", func(sc *onceflow.StepContext) (string, any, error) {
				var f Form
				if err := sc.DecodeInput(&f); err != nil {
					return "", nil, err
				}
				return ds.crm.url + "/leads", map[string]any{"submission_id": f.SubmissionID, "name": f.Name, "email": f.Email, "phone": f.Phone}, nil
			}),
			step("welcome_email", "welcome-email:{input.submission_id}", "mailer", func(sc *onceflow.StepContext) (string, any, error) {
				f, lead, err := formAndLead(sc)
				if err != nil {
					return "", nil, err
				}
				return ds.mailer.url + "/send", map[string]any{"submission_id": f.SubmissionID, "to": f.Email, "template": "welcome",
					"vars": map[string]any{"name": f.Name, "lead_id": lead}}, nil
			}, "crm"),
			step("whatsapp", "whatsapp-notice:{input.submission_id}", "chat", func(sc *onceflow.StepContext) (string, any, error) {
				var f Form
				if err := sc.DecodeInput(&f); err != nil {
					return "", nil, err
				}
				return ds.chat.url + "/messages", map[string]any{"submission_id": f.SubmissionID, "to": f.Phone,
					"text": fmt.Sprintf("Hi %s, thanks for your message. We will call you today.", f.Name)}, nil
			}, "crm"),
			step("sales_task", "sales-task:{input.submission_id}", "crm", func(sc *onceflow.StepContext) (string, any, error) {
				f, lead, err := formAndLead(sc)
				if err != nil {
					return "", nil, err
				}
				return ds.crm.url + "/tasks", map[string]any{"submission_id": f.SubmissionID, "lead_id": lead,
					"title": "Call " + f.Name}, nil
			}, "crm"),
		},
	}
}

// formAndLead decodes the run's form and the lead the crm step created.
func formAndLead(sc *onceflow.StepContext) (Form, string, error) {
	var f Form
	if err := sc.DecodeInput(&f); err != nil {
		return f, "", err
	}
	var lead struct {
		LeadID string `json:"lead_id"`
	}
	if err := sc.DecodeOutput("crm", &lead); err != nil {
		return f, "", err
	}
	if lead.LeadID == "" {
		return f, "", onceflow.PermanentError(errNoLead)
	}
	return f, lead.LeadID, nil
}

// actionOf names the destination and business action a step performs, for the check that
// every completed step's effect happened exactly once.
func actionOf(ds *destinations, step string) (*destination, string) {
	switch step {
	case "crm":
		return ds.crm, "lead"
	case "sales_task":
		return ds.crm, "task"
	case "welcome_email":
		return ds.mailer, "welcome"
	case "whatsapp":
		return ds.chat, "notice"
	}
	return nil, ""
}
