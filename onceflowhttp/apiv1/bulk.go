package apiv1

import (
	"github.com/onceflow/onceflow"
)

// Bulk is the result of a bulk review action. P is the shape of a replay plan (the API adds
// links to Plan).
type Bulk[P any] struct {
	Action  string        `json:"action"`
	DryRun  bool          `json:"dry_run"`
	Matched int           `json:"matched"`
	OK      int           `json:"ok"`
	Refused int           `json:"refused"`
	Items   []BulkItem[P] `json:"items"`
	// Error is why the action stopped before it reached every item.
	Error string `json:"error,omitempty"`
}

// BulkItem is what a bulk review action did to one item.
type BulkItem[P any] struct {
	RunID  int64  `json:"run_id"`
	Step   string `json:"step"`
	Reason string `json:"reason"`
	// Version is the item's version as read; a confirmation names it.
	Version string `json:"version,omitempty"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
	// Problem is the type of the problem document the API answers the item's error with.
	Problem   string         `json:"problem,omitempty"`
	RunState  onceflow.State `json:"run_state,omitempty"`
	SameRunAs string         `json:"same_run_as,omitempty"`
	Plan      *P             `json:"plan,omitempty"`
}

// NewBulkItem shapes it without its error and plan, which the caller shapes (the API adds
// the type of the problem the error is).
func NewBulkItem[P any](it *onceflow.BulkItem) BulkItem[P] {
	return BulkItem[P]{RunID: it.RunID, Step: it.Step, Reason: string(it.Reason), Version: it.Version, OK: it.OK, RunState: it.RunState, SameRunAs: it.SameRunAs}
}
