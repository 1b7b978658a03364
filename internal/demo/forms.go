package demo

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/onceflow/onceflow"
)

// submission is one form post: a run key (the form's request id) and the form.
type submission struct {
	RunKey string
	Form   Form
	// Resubmits is the index of the earlier submission this one repeats under a new
	// request id, or -1.
	Resubmits int
	// Corrected is true when the repeat changed the form's data.
	Corrected bool
	// Together: the double click arrives as two concurrent requests, not one after the other.
	Together bool
}

var people = []string{
	"Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Edsger Dijkstra", "Barbara Liskov",
	"Donald Knuth", "Margaret Hamilton", "John McCarthy", "Frances Allen", "Ken Thompson", "Radia Perlman",
}

// submissions returns n form posts. Every eighth repeats the previous one under a new
// request id (the visitor sent the form again the next day), the first of those with a
// corrected e-mail address; every sixth form carries a phone number the chat notifier
// cannot reach.
func submissions(n int) []submission {
	subs := make([]submission, n)
	corrected := false
	for i := range subs {
		s := submission{RunKey: fmt.Sprintf("form-request-%04d", i+1), Resubmits: -1, Together: i%2 == 0}
		if i%8 == 7 {
			s.Form, s.Resubmits = subs[i-1].Form, i-1
			if !corrected {
				s.Form.Email = strings.Replace(s.Form.Email, "@example.com", "@example.org", 1)
				s.Corrected, corrected = true, true
			}
		} else {
			name := people[i%len(people)]
			sid := fmt.Sprintf("sub-%04d", 1001+i)
			s.Form = Form{
				SubmissionID: sid,
				Name:         name,
				Email:        strings.ToLower(strings.ReplaceAll(name, " ", ".")) + "." + sid[4:] + "@example.com",
				Phone:        fmt.Sprintf("+4915%08d", 20000000+i*7919),
			}
			if i%6 == 4 {
				s.Form.Phone = fmt.Sprintf("%s555%04d", unreachablePrefix, i)
			}
		}
		subs[i] = s
	}
	return subs
}

// startTally records what Start answered for every submission.
type startTally struct {
	mu      sync.Mutex
	created map[string]int   // run key → starts that created the run
	ids     map[string]int64 // run key → run ID first seen
	calls   int
	dups    int
	errs    []string
}

func (t *startTally) add(key string, run *onceflow.Run, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls++
	if err != nil {
		t.errs = append(t.errs, fmt.Sprintf("start %s: %v", key, err))
		return
	}
	if run.Duplicate {
		t.dups++
	} else {
		t.created[key]++
	}
	if id, ok := t.ids[key]; ok && id != run.ID {
		t.errs = append(t.errs, fmt.Sprintf("start %s returned run %d and run %d", key, id, run.ID))
	} else if !ok {
		t.ids[key] = run.ID
	}
}

// submitAll posts every form twice, as a double click does, from several goroutines at
// once; half of the double clicks arrive concurrently.
func submitAll(ctx context.Context, c *onceflow.Client, subs []submission, senders int) *startTally {
	t := &startTally{created: map[string]int{}, ids: map[string]int64{}}
	work := make(chan submission)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for s := range work {
				start := func() {
					run, err := c.Start(ctx, WorkflowName, s.RunKey, s.Form)
					t.add(s.RunKey, run, err)
				}
				if !s.Together {
					start()
					start()
					continue
				}
				var both sync.WaitGroup
				gate := make(chan struct{})
				for range 2 {
					both.Go(func() { <-gate; start() })
				}
				close(gate)
				both.Wait()
			}
		})
	}
	for _, s := range subs {
		select {
		case work <- s:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return t
}
