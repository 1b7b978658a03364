package store

import (
	"context"
	"time"
)

// StatsStore counts what is in the store, for metrics (package metrics) and dashboards.
// Every backend implements it; Store embeds it.
type StatsStore interface {
	// StatsGet counts runs and steps by state, the steps waiting for review by reason, and
	// the steps due at Now that no worker has claimed yet (pending or retrying, nothing
	// left to wait for, NextAt <= Now). The counts are taken from one snapshot of the
	// database. It changes nothing and appends no event. Groups with no rows are absent.
	StatsGet(ctx context.Context, p StatsGetParams) (*Stats, error)
}

// StatsGetParams are the arguments of StatsGet.
type StatsGetParams struct {
	// Now decides which steps are due.
	Now time.Time
}

// Stats are the counts StatsGet returns. Their labels are workflow names, step names,
// states and reason codes only: never keys, entities or ids.
type Stats struct {
	// Runs counts runs by workflow and state.
	Runs []RunCount
	// Steps counts steps by workflow, step name and state.
	Steps []StepCount
	// Review counts steps in needs_review by workflow and reason.
	Review []ReviewCount
	// Due counts steps due and not claimed, by workflow.
	Due []DueCount
}

// RunCount is the number of runs of one workflow in one state.
type RunCount struct {
	Workflow string
	State    State
	Count    int64
}

// StepCount is the number of steps of one workflow's step in one state.
type StepCount struct {
	Workflow string
	Step     string
	State    State
	Count    int64
}

// ReviewCount is the number of steps of one workflow waiting for review for one reason.
type ReviewCount struct {
	Workflow string
	Reason   Reason
	Count    int64
}

// DueCount is the number of due, unclaimed steps of one workflow.
type DueCount struct {
	Workflow string
	Count    int64
}
