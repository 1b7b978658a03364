package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/store"
)

// fanOutStarters bounds the starts of one page's items in flight at once; concurrent
// starts are group-committed together.
const fanOutStarters = 32

// maxFanOutPages stops a list whose cursors never end.
const maxFanOutPages = 100000

// fanOutWorkflow is the workflow whose one step walks a fan-out schedule's list for a tick
// and starts a run of the schedule's workflow for each item.
func (c *Client) fanOutWorkflow(sd *scheduleDef) Workflow {
	timeout := sd.ForEach.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	return Workflow{Name: sd.Name + fanOutSuffix, Entity: "schedule:" + sd.Name, Steps: []Step{{
		ID: "for-each", Do: c.fanOutStep(sd), Retry: sd.ForEach.Retry, Timeout: timeout,
	}}}
}

// FanOutResult is the output of the step that walks a fan-out's list.
type FanOutResult struct {
	Pages int `json:"pages"`
	Items int `json:"items"`
	// Started counts runs this walk started; Existing runs an earlier walk had started.
	Started  int `json:"started"`
	Existing int `json:"existing"`
}

func (c *Client) fanOutStep(sd *scheduleDef) StepFunc {
	return func(ctx context.Context, sc *StepContext) (any, error) {
		var in struct {
			Schedule struct {
				Time string `json:"time"`
			} `json:"schedule"`
		}
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		at, err := time.Parse(time.RFC3339, in.Schedule.Time)
		if err != nil {
			return nil, PermanentError(fmt.Errorf("schedule time %q: %w", in.Schedule.Time, err))
		}
		tick := sd.tick(at)
		var res FanOutResult
		var itemErrs []error
		cursor := ""
		for {
			if res.Pages == maxFanOutPages {
				return nil, PermanentError(fmt.Errorf("the list has more than %d pages; its next cursor never ends", maxFanOutPages))
			}
			page, err := sd.ForEach.Fetch(ctx, tick, cursor)
			if err != nil {
				return nil, fmt.Errorf("fetch page %d of the list: %w", res.Pages+1, err)
			}
			res.Pages++
			started, existing, errs, err := c.startItems(ctx, sd, tick, page.Items)
			if err != nil {
				return nil, err // the database: retried, and the items started so far are kept
			}
			res.Items += len(page.Items)
			res.Started += started
			res.Existing += existing
			itemErrs = append(itemErrs, errs...)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if page.Next == "" {
				break
			}
			if page.Next == cursor {
				return nil, PermanentError(fmt.Errorf("page %d names itself (%q) as the next page", res.Pages, cursor))
			}
			cursor = page.Next
		}
		if len(itemErrs) > 0 {
			return nil, PermanentError(fmt.Errorf("%d of %d items could not be started (the others were): %w", len(itemErrs), res.Items, errors.Join(first(itemErrs, 5)...)))
		}
		return res, nil
	}
}

func first(errs []error, n int) []error {
	if len(errs) > n {
		return append(errs[:n:n], fmt.Errorf("… and %d more", len(errs)-n))
	}
	return errs
}

// startItems starts a run for each item whose run does not exist yet, concurrently so that
// the starts are committed together. Items whose run exists are found by an index lookup
// and write nothing.
func (c *Client) startItems(ctx context.Context, sd *scheduleDef, tick Tick, items []json.RawMessage) (started, existing int, errs []error, failed error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, fanOutStarters)
	for i, raw := range items {
		item, err := keytmpl.Decode(raw)
		if _, ok := item.(map[string]any); err != nil || !ok {
			mu.Lock()
			errs = append(errs, fmt.Errorf("item %d is not a JSON object", i+1))
			mu.Unlock()
			continue
		}
		input := map[string]any{"schedule": tick.data(), "item": item}
		key, err := sd.runKey.Render(input)
		if err == nil {
			err = ValidateKey("run key", key)
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("item %d: run key: %w", i+1, err))
			mu.Unlock()
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := c.store.RunGetByKey(ctx, sd.Workflow, key)
			if err == nil {
				mu.Lock()
				existing++
				mu.Unlock()
				return
			}
			if errors.Is(err, store.ErrNotFound) {
				var run *Run
				if run, err = c.startAs(ctx, sd.Workflow, key, input, store.ActorScheduler); err == nil {
					mu.Lock()
					if run.Duplicate {
						existing++
					} else {
						started++
					}
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			var ie *InputError
			var ce *RunConflictError
			if errors.As(err, &ie) || errors.As(err, &ce) {
				errs = append(errs, fmt.Errorf("item %s: %w", key, err))
			} else if failed == nil {
				failed = fmt.Errorf("start item %s: %w", key, err)
			}
		})
	}
	wg.Wait()
	return started, existing, errs, failed
}
