package gostep_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/steps/gostep"
	"github.com/onceflow/onceflow/steps/steptest"
)

func TestConformance(t *testing.T) {
	steptest.Exercise(t, func(t *testing.T) steptest.Harness {
		var mu sync.Mutex
		var next []steptest.Outcome
		var keys []string
		fn := func(_ context.Context, sc *onceflow.StepContext) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			keys = append(keys, sc.EffectKey)
			o := steptest.Success
			if len(next) > 0 {
				o, next = next[0], next[1:]
			}
			switch o {
			case steptest.Retryable:
				return nil, errors.New("the points service answered 503")
			case steptest.Permanent:
				return nil, onceflow.PermanentError(errors.New("no such customer"))
			case steptest.Unknown:
				return nil, onceflow.UnknownOutcomeError(errors.New("the connection dropped after the request was sent"))
			}
			return map[string]int{"points": 10}, nil
		}
		return steptest.Harness{
			Kind:  gostep.New(map[string]onceflow.StepFunc{"award-points": fn}),
			Block: "award-points",
			Arrange: func(_ *testing.T, o steptest.Outcome) bool {
				mu.Lock()
				next = append(next, o)
				mu.Unlock()
				return true
			},
			Identities: func(*testing.T) []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), keys...) },
		}
	})
}
