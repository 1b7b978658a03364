package apiv1

import (
	"time"

	"github.com/onceflow/onceflow"
)

// ReviewItem is a step parked for review (or one just decided), as the API and the
// command's --json show it: the same members, each left out under the same rule.
type ReviewItem struct {
	RunID           int64            `json:"run_id"`
	Workflow        string           `json:"workflow"`
	Step            string           `json:"step"`
	RunKey          string           `json:"run_key"`
	Entity          string           `json:"entity,omitempty"`
	State           onceflow.State   `json:"state"`
	EffectKey       string           `json:"effect_key,omitempty"`
	Reason          string           `json:"reason"`
	LastError       string           `json:"last_error,omitempty"`
	LastOutcome     onceflow.Outcome `json:"last_outcome,omitempty"`
	Attempts        int              `json:"attempts"`
	AttemptBase     int              `json:"attempt_base,omitempty"`
	ResponseStatus  int              `json:"response_status,omitempty"`
	ResponseExcerpt string           `json:"response_excerpt,omitempty"`
	Since           time.Time        `json:"since"`
	AgeSeconds      int64            `json:"age_seconds"`
	EffectMayExist  bool             `json:"effect_may_exist"`
	// Links are the item's and its run's addresses in the API; the command has none.
	Links *ItemLinks `json:"links,omitempty"`
}

// ItemLinks are a review item's links.
type ItemLinks struct {
	Self string `json:"self"`
	Run  string `json:"run"`
}

// NewReviewItem shapes it; links gives its links (nil: none).
func NewReviewItem(it *onceflow.ReviewItem, links func(runID int64, step string) ItemLinks) ReviewItem {
	v := ReviewItem{RunID: it.RunID, Workflow: it.Workflow, Step: it.Step, RunKey: it.RunKey, Entity: it.Entity, State: it.State,
		EffectKey: it.EffectKey, Reason: string(it.Reason), LastError: it.LastError, LastOutcome: it.LastOutcome, Attempts: it.Attempts,
		AttemptBase: it.AttemptBase, ResponseStatus: it.ResponseStatus, ResponseExcerpt: it.ResponseExcerpt,
		Since: it.Since, AgeSeconds: int64(it.Age / time.Second), EffectMayExist: it.EffectMayExist}
	if links != nil {
		l := links(it.RunID, it.Step)
		v.Links = &l
	}
	return v
}
