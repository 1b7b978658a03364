package apiv1

import (
	"time"

	"github.com/onceflow/onceflow"
)

// Schedule is a registered schedule: its next ticks and the last tick fired and its run.
type Schedule struct {
	Name       string      `json:"name"`
	Workflow   string      `json:"workflow"`
	Cron       string      `json:"cron"`
	Timezone   string      `json:"timezone"`
	RunKey     string      `json:"run_key"`
	CatchUp    string      `json:"catch_up"`
	MaxCatchUp int         `json:"max_catch_up"`
	ForEach    bool        `json:"for_each"`
	Next       []time.Time `json:"next"`
	LastTick   *time.Time  `json:"last_tick"`
	LastRunID  int64       `json:"last_run_id,omitempty"`
}

// NewSchedule shapes in.
func NewSchedule(in onceflow.ScheduleInfo) Schedule {
	v := Schedule{Name: in.Name, Workflow: in.Workflow, Cron: in.Cron, Timezone: in.Timezone, RunKey: in.RunKey,
		CatchUp: string(in.CatchUp), MaxCatchUp: in.MaxCatchUp, ForEach: in.ForEach, Next: in.Next, LastTick: timePtr(in.LastTick),
		LastRunID: in.LastRunID}
	if v.Next == nil {
		v.Next = []time.Time{}
	}
	return v
}
