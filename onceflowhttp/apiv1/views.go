// Package apiv1 holds JSON documents of version 1 of the onceflow HTTP API that the
// onceflow command's --json output prints too — replay plans, audit entries, effect-key
// reports, review items, attempts, bulk results and schedules — so that both show the same
// document for the same thing, and a Go program can decode either.
//
// The constructors shape what the client's read API returns (onceflow.Reader), which is
// already masked by the client's redaction policy; they mask nothing themselves.
package apiv1

import (
	"encoding/json"
	"time"

	"github.com/onceflow/onceflow"
)

// Plan is a replay plan.
type Plan struct {
	RunID     int64           `json:"run_id"`
	Workflow  string          `json:"workflow"`
	RunKey    string          `json:"run_key"`
	Entity    string          `json:"entity,omitempty"`
	Corrected bool            `json:"corrected"`
	Diff      json.RawMessage `json:"diff,omitempty"`
	Steps     []PlanStep      `json:"steps"`
	Counts    map[string]int  `json:"counts"`
	// Digest names the plan; a confirmation of the replay passes it back as plan_digest.
	Digest string `json:"digest"`
}

// PlanStep is what a replay would do to one step.
type PlanStep struct {
	Step         string         `json:"step"`
	State        onceflow.State `json:"state"`
	Action       string         `json:"action"`
	EffectKey    string         `json:"effect_key,omitempty"`
	CorrectedKey string         `json:"corrected_key,omitempty"`
	Reason       string         `json:"reason,omitempty"`
	After        []string       `json:"after,omitempty"`
	ByRun        int64          `json:"by_run,omitempty"`
	ByStep       string         `json:"by_step,omitempty"`
	At           *time.Time     `json:"at,omitempty"`
	Why          string         `json:"why"`
}

// NewPlan shapes p.
func NewPlan(p *onceflow.ReplayPlan) Plan {
	v := Plan{RunID: p.RunID, Workflow: p.Workflow, RunKey: p.RunKey, Entity: p.Entity, Corrected: p.Corrected,
		Steps: []PlanStep{}, Counts: map[string]int{}, Digest: p.Digest}
	if len(p.Diff) > 0 {
		v.Diff = p.Diff
	}
	for _, ps := range p.Steps {
		sv := PlanStep{Step: ps.Step, State: ps.State, Action: string(ps.Action), EffectKey: ps.EffectKey, CorrectedKey: ps.CorrectedKey,
			Reason: string(ps.Reason), After: ps.After, ByRun: ps.ByRun, ByStep: ps.ByStep, At: timePtr(ps.At), Why: ps.Why}
		v.Steps = append(v.Steps, sv)
		v.Counts[string(ps.Action)]++
	}
	return v
}

// AuditEntry is an audit event with the sentence that explains it.
type AuditEntry struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Type      string          `json:"type"`
	RunID     int64           `json:"run_id,omitempty"`
	Workflow  string          `json:"workflow,omitempty"`
	Entity    string          `json:"entity,omitempty"`
	Step      string          `json:"step,omitempty"`
	EffectKey string          `json:"effect_key,omitempty"`
	Attempt   int             `json:"attempt,omitempty"`
	Actor     string          `json:"actor"`
	Reason    string          `json:"reason,omitempty"`
	Why       string          `json:"why"`
	Detail    json.RawMessage `json:"detail"`
}

// NewAuditEntry shapes e; an event without detail shows {}.
func NewAuditEntry(e *onceflow.AuditEntry) AuditEntry {
	d := e.Detail
	if len(d) == 0 {
		d = json.RawMessage(`{}`)
	}
	return AuditEntry{ID: e.ID, At: e.At, Type: string(e.Type), RunID: e.RunID, Workflow: e.Workflow, Entity: e.Entity, Step: e.StepName,
		EffectKey: e.EffectKey, Attempt: e.Attempt, Actor: e.Actor, Reason: string(e.Reason), Why: e.Why, Detail: d}
}

// Key is what is known of an effect key.
type Key struct {
	Key    string       `json:"key"`
	State  string       `json:"state"`
	Effect *Effect      `json:"effect,omitempty"`
	Uses   []KeyUse     `json:"uses"`
	Events []AuditEntry `json:"events"`
}

// Effect is the ledger row of a key.
type Effect struct {
	State       onceflow.EffectState `json:"state"`
	RunID       int64                `json:"run_id"`
	Workflow    string               `json:"workflow"`
	Step        string               `json:"step"`
	Result      json.RawMessage      `json:"result,omitempty"`
	CreatedAt   time.Time            `json:"created_at"`
	CompletedAt *time.Time           `json:"completed_at,omitempty"`
}

// KeyUse is a step that uses a key.
type KeyUse struct {
	RunID    int64  `json:"run_id"`
	Workflow string `json:"workflow"`
	Entity   string `json:"entity,omitempty"`
	Step     string `json:"step"`
	Last     string `json:"last_event"`
	Link     string `json:"link,omitempty"`
}

// NewKey shapes rep; link gives the link to a step of a run (nil for none).
func NewKey(rep *onceflow.KeyReport, link func(runID int64, step string) string) Key {
	out := Key{Key: rep.Key, State: rep.State, Uses: []KeyUse{}, Events: []AuditEntry{}}
	if e := rep.Effect; e != nil {
		ev := &Effect{State: e.State, RunID: e.RunID, Workflow: e.Workflow, Step: e.StepName, CreatedAt: e.CreatedAt, CompletedAt: timePtr(e.CompletedAt)}
		if len(e.Result) > 0 {
			ev.Result = e.Result
		}
		out.Effect = ev
	}
	for _, u := range rep.Uses {
		uv := KeyUse{RunID: u.RunID, Workflow: u.Workflow, Entity: u.Entity, Step: u.Step, Last: string(u.Last)}
		if link != nil {
			uv.Link = link(u.RunID, u.Step)
		}
		out.Uses = append(out.Uses, uv)
	}
	for _, e := range rep.Events {
		out.Events = append(out.Events, NewAuditEntry(e))
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
