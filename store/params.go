package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The Validate methods check what a call needs before a backend opens a transaction;
// backends call them first and prefix their own name to the error.

// Validate checks the arguments of RunInsert and of each entry of RunInsertMany.
func (p RunInsertParams) Validate() error {
	if p.Workflow == "" || p.RunKey == "" {
		return errors.New("run insert: Workflow and RunKey are required")
	}
	if p.Input == nil {
		return errors.New("run insert: the input is required (JSON null for none)")
	}
	if !json.Valid(p.Input) {
		return errors.New("run insert: the input is not valid JSON")
	}
	seen := make(map[string]bool, len(p.Steps))
	for _, st := range p.Steps {
		if st.Name == "" || seen[st.Name] {
			return fmt.Errorf("run insert: step name %q is empty or repeated", st.Name)
		}
		seen[st.Name] = true
	}
	for _, st := range p.Steps {
		for _, n := range st.Needs {
			if !seen[n] || n == st.Name {
				return fmt.Errorf("run insert: step %q needs %q, which is not another step of the run", st.Name, n)
			}
		}
	}
	return nil
}

// Validate checks the arguments of StepClaim.
func (p StepClaimParams) Validate() error {
	if p.Owner == "" || p.LeaseFor <= 0 || p.Prepare == nil {
		return errors.New("step claim: Owner, LeaseFor and Prepare are required")
	}
	return nil
}

// Validate checks the arguments of StepReapExpired.
func (p StepReapParams) Validate() error {
	if p.Decide == nil {
		return errors.New("step reap: Decide is required")
	}
	return nil
}

// Validate checks the arguments of LeaderAttempt.
func (p LeaderAttemptParams) Validate() error {
	if p.Name == "" || p.Owner == "" || p.TTL <= 0 {
		return errors.New("leader attempt: Name, Owner and a positive TTL are required")
	}
	return nil
}

// Validate checks the arguments of EntityTransition.
func (p EntityTransitionParams) Validate() error {
	if p.Key == "" || p.To == "" || p.EffectKey == "" || len(p.From) == 0 {
		return errors.New("entity transition: Key, From, To and EffectKey are required")
	}
	return nil
}

// Validate checks the arguments of EventScan.
func (p EventScanParams) Validate() error {
	if len(p.Types) == 0 {
		return errors.New("event scan: Types is required")
	}
	return nil
}

// Validate checks the arguments of ReviewResolve.
func (p ReviewResolveParams) Validate() error {
	if p.Output != nil && !json.Valid(p.Output) {
		return errors.New("review resolve: the output is not valid JSON")
	}
	return nil
}

// Validate checks the arguments of RunReplay.
func (p RunReplayParams) Validate() error {
	if p.Actor == "" {
		return errors.New("run replay: the actor is required")
	}
	if p.Input != nil && (!json.Valid(p.Input) || !json.Valid(p.BaseInput) || !json.Valid(p.Diff)) {
		return errors.New("run replay: Input, BaseInput and Diff must be valid JSON")
	}
	return nil
}

// Validate checks the arguments of RetentionPurge.
func (p RetentionPurgeParams) Validate() error {
	if p.Now.IsZero() {
		return errors.New("retention purge: Now is required")
	}
	return nil
}

// Validate checks the arguments of IncidentRecord.
func (p IncidentRecordParams) Validate() error {
	if p.Cursor == "" || p.To < p.From || p.Now.IsZero() {
		return errors.New("Cursor, Now and To >= From are required")
	}
	for _, h := range p.Hits {
		if h.Policy == "" || h.Window <= 0 || h.Event.EventID <= 0 || h.Event.At.IsZero() {
			return fmt.Errorf("hit of event %d: Policy, a positive Window, Event.EventID and Event.At are required", h.Event.EventID)
		}
	}
	return nil
}
