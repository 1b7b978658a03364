package apiv1

import (
	"time"

	"github.com/onceflow/onceflow"
)

// Attempt is one attempt of a step, as the API's run and review answers and the command's
// review show --json print it.
type Attempt struct {
	Number          int              `json:"number"`
	Worker          string           `json:"worker"`
	StartedAt       time.Time        `json:"started_at"`
	EndedAt         *time.Time       `json:"ended_at,omitempty"`
	Outcome         onceflow.Outcome `json:"outcome,omitempty"`
	Error           string           `json:"error,omitempty"`
	ResponseStatus  int              `json:"response_status,omitempty"`
	ResponseExcerpt string           `json:"response_excerpt,omitempty"`
	// Request is what the attempt sent, masked (absent when its step recorded nothing).
	Request *onceflow.Request `json:"request,omitempty"`
}

// NewAttempt shapes a.
func NewAttempt(a *onceflow.AttemptInfo) Attempt {
	v := Attempt{Number: a.Number, Worker: a.Worker, StartedAt: a.StartedAt, Outcome: a.Outcome,
		Error: a.Error, ResponseStatus: a.ResponseStatus, ResponseExcerpt: a.ResponseExcerpt, Request: a.Request}
	if !a.EndedAt.IsZero() {
		t := a.EndedAt
		v.EndedAt = &t
	}
	return v
}
