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
	// StatsActivity counts, by queries that count (never a capped read of the trail),
	// what the audit trail records from p.Since on, per slice of p.Bucket: the runs
	// created (run.created), the steps completed (step.completed), the retries scheduled
	// (step.retry_scheduled), the steps parked (step.needs_review) and failed
	// (step.failed), stored or derived alike; and the latest p.Failures events of the
	// last two types, newest first. It changes nothing.
	StatsActivity(ctx context.Context, p StatsActivityParams) (*Activity, error)
}

// StatsActivityParams are the arguments of StatsActivity.
type StatsActivityParams struct {
	// Since is the start of the first slice; Bucket the length of a slice (required).
	Since  time.Time
	Bucket time.Duration
	// Failures caps the latest failures returned (0: none).
	Failures int
}

// Activity is what StatsActivity counts.
type Activity struct {
	// Buckets holds the slices with something to count, in order: Buckets[i].Slice is the
	// slice from Since + Slice×Bucket on.
	Buckets []ActivityBucket
	// Failures are the latest step.needs_review and step.failed events, newest first.
	Failures []*Event
}

// ActivityBucket counts the events of one slice of time.
type ActivityBucket struct {
	Slice                                       int
	Started, Completed, Retried, Parked, Failed int64
}

// ActivityTypes are the event types StatsActivity counts.
var ActivityTypes = []EventType{EventRunCreated, EventStepCompleted, EventStepRetryPlanned, EventStepNeedsReview, EventStepFailed}

// AddActivity adds n events of type typ in slice to the buckets of a, keeping them in
// order of slice; backends call it for each count their query returns.
func (a *Activity) AddActivity(slice int, typ EventType, n int64) {
	i := len(a.Buckets)
	for j, b := range a.Buckets {
		if b.Slice >= slice {
			i = j
			break
		}
	}
	if i == len(a.Buckets) || a.Buckets[i].Slice != slice {
		a.Buckets = append(a.Buckets, ActivityBucket{})
		copy(a.Buckets[i+1:], a.Buckets[i:])
		a.Buckets[i] = ActivityBucket{Slice: slice}
	}
	b := &a.Buckets[i]
	switch typ {
	case EventRunCreated:
		b.Started += n
	case EventStepCompleted:
		b.Completed += n
	case EventStepRetryPlanned:
		b.Retried += n
	case EventStepNeedsReview:
		b.Parked += n
	case EventStepFailed:
		b.Failed += n
	}
}

// StatsGetParams are the arguments of StatsGet.
type StatsGetParams struct {
	// Now decides which steps are due.
	Now time.Time
	// WithoutSteps leaves Stats.Steps empty: counting the steps by state reads every step,
	// which a page that shows runs, the review queue and the due steps does not need.
	WithoutSteps bool
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
