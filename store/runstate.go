package store

// StepStatus is the part of a step that decides its run's state.
type StepStatus struct {
	State   State
	Waiting int
	// Delayed is set for a pending step that waits for its due time (reason delayed).
	Delayed bool
}

// DeriveRunState computes a run's state from its steps. Backends call it inside the
// transaction that changed a step, so a run's stored state always matches its steps:
//
//   - any step in needs_review → needs_review (a person is needed, even while other
//     branches go on);
//   - otherwise, while work can progress (a step processing, retrying, or pending with
//     nothing left to wait for): processing if any step is processing or has finished,
//     retrying if every active step is retrying, pending before anything has started;
//   - otherwise pending while a step waits for its due time (a delay, not_before);
//   - otherwise failed if any step failed, cancelled if any was cancelled, else completed.
func DeriveRunState(steps []StepStatus) State {
	var review, processing, retrying, ready, delayed, failed, cancelled, started bool
	for _, s := range steps {
		switch s.State {
		case StateNeedsReview:
			review = true
		case StateProcessing:
			processing = true
		case StateRetrying:
			retrying = true
		case StatePending:
			switch {
			case s.Waiting == 0 && s.Delayed:
				delayed = true
			case s.Waiting == 0:
				ready = true
			}
		case StateFailed:
			failed = true
		case StateCancelled:
			cancelled = true
		}
		if s.State != StatePending {
			started = true
		}
	}
	switch {
	case review:
		return StateNeedsReview
	case processing:
		return StateProcessing
	case retrying && !ready:
		return StateRetrying
	case retrying || ready:
		if started {
			return StateProcessing
		}
		return StatePending
	case delayed:
		return StatePending
	case failed:
		return StateFailed
	case cancelled:
		return StateCancelled
	}
	for _, s := range steps {
		if s.State != StateCompleted && s.State != StateSkipped {
			// Steps blocked behind nothing active: treat as still in progress.
			return StateProcessing
		}
	}
	return StateCompleted
}
