package onceflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
	return Workflow{Name: sd.Name + fanOutSuffix, Entity: "schedule:" + sd.Name, Access: Access{Internal: true}, Steps: []Step{{
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

// fanOutProgress is the checkpoint of a fan-out's walk after each page: the next page's
// cursor and the counts so far, so that an attempt after a crash, a timeout or a failed
// fetch goes on from the page where the previous one stopped.
type fanOutProgress struct {
	// Tick is the schedule time of the walk, so that a checkpoint is read only by it.
	Tick   string `json:"tick"`
	Cursor string `json:"cursor"`
	FanOutResult
	// Failed counts the items that could not be started; Errors are the first of their
	// errors.
	Failed int      `json:"failed,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

// maxFanOutErrors is how many item errors a fan-out reports.
const maxFanOutErrors = 5

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
		prog := fanOutProgress{Tick: in.Schedule.Time}
		if sc.Progress != nil {
			var saved fanOutProgress
			if json.Unmarshal(sc.Progress, &saved) == nil && saved.Tick == prog.Tick && saved.Cursor != "" {
				prog = saved // go on from the page the previous attempt had reached
			}
		}
		res := &prog.FanOutResult
		for {
			if res.Pages == maxFanOutPages {
				return nil, PermanentError(fmt.Errorf("the list has more than %d pages; its next cursor never ends", maxFanOutPages))
			}
			page, err := sd.ForEach.Fetch(ctx, tick, prog.Cursor)
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
			prog.Failed += len(errs)
			for _, e := range errs {
				if len(prog.Errors) < maxFanOutErrors {
					prog.Errors = append(prog.Errors, e.Error())
				}
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if page.Next == "" {
				break
			}
			if page.Next == prog.Cursor {
				return nil, PermanentError(fmt.Errorf("page %d names itself (%q) as the next page", res.Pages, prog.Cursor))
			}
			prog.Cursor = page.Next
			if sc.checkpointer != nil {
				if err := sc.Checkpoint(ctx, prog); err != nil {
					return nil, err
				}
			}
		}
		if prog.Failed > 0 {
			more := ""
			if prog.Failed > len(prog.Errors) {
				more = fmt.Sprintf("; … and %d more", prog.Failed-len(prog.Errors))
			}
			return nil, PermanentError(fmt.Errorf("%d of %d items could not be started (the others were): %s%s",
				prog.Failed, res.Items, strings.Join(prog.Errors, "; "), more))
		}
		return *res, nil
	}
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
				if run, err = c.startAs(ctx, nil, sd.Workflow, key, input, store.ActorScheduler); err == nil {
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
