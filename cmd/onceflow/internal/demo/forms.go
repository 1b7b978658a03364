package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Form is a website contact form: the input of a website-lead run.
type Form struct {
	SubmissionID string `json:"submission_id"`
	Name         string `json:"name"`
	Email        string `json:"email"`
	Phone        string `json:"phone,omitempty"`
	Message      string `json:"message"`
}

var people = []string{
	"Ada Lovelace", "Grace Hopper", "Alan Turing", "Katherine Johnson", "Edsger Dijkstra", "Barbara Liskov",
	"Donald Knuth", "Margaret Hamilton", "John McCarthy", "Frances Allen", "Ken Thompson", "Radia Perlman",
}

// forms returns n website forms. Every third leaves the phone empty (no WhatsApp notice),
// and every sixth gives a number WhatsApp refuses.
func forms(n int) []Form {
	out := make([]Form, n)
	for i := range out {
		name := people[i%len(people)]
		sid := fmt.Sprintf("web-%04d", 1001+i)
		f := Form{
			SubmissionID: sid,
			Name:         name,
			Email:        strings.ToLower(strings.ReplaceAll(name, " ", ".")) + "." + sid[4:] + "@example.com",
			Message:      "Please call me about a quote.",
		}
		switch i % 6 {
		case 2, 5:
		case 4:
			f.Phone = fmt.Sprintf("%s01%05d", unreachablePrefix, i)
		default:
			f.Phone = fmt.Sprintf("+4915%08d", 20000000+i*7919)
		}
		out[i] = f
	}
	return out
}

// FormStats counts the website's posts to POST /v1/workflows/website-lead/runs.
type FormStats struct {
	Forms int `json:"forms"`
	// Posts counts every request, the retries after 409 included.
	Posts int `json:"posts"`
	// Created counts 201 answers that created a run; Replayed those that returned the run
	// a first post had created (Idempotent-Replayed: true).
	Created  int `json:"created"`
	Replayed int `json:"replayed"`
	// InProgress counts 409 answers (the twin post was still being stored), each retried
	// after its Retry-After.
	InProgress int `json:"in_progress_409"`
	// KeyReused counts 422 answers: the key posted again with an edited body.
	KeyReused int `json:"key_reused_422"`
}

// formPoster posts the website's forms.
type formPoster struct {
	c     *caller
	token string
	runs  *runIDs

	mu    sync.Mutex
	stats FormStats
}

const formsPath = "/v1/workflows/" + leadWorkflow + "/runs"

// postAll posts every form twice, as a double click does (every fourth one at the same
// instant), and then posts the first form's key once more with an edited body.
func (p *formPoster) postAll(ctx context.Context, fs []Form, senders int) {
	p.stats.Forms = len(fs)
	fanOut(ctx, len(fs), senders, func(i int) {
		body, _ := json.Marshal(fs[i])
		post := func() { p.post(ctx, fs[i].SubmissionID, body, http.StatusCreated) }
		if i%4 == 0 {
			together(post)
		} else {
			post()
			post()
		}
	})
	if len(fs) > 0 && ctx.Err() == nil {
		edited := fs[0]
		edited.Message = "Edited after sending: please e-mail instead."
		body, _ := json.Marshal(edited)
		p.post(ctx, edited.SubmissionID, body, http.StatusUnprocessableEntity)
	}
}

// post sends one form until it gets an answer other than 409, as a well-behaved client
// does, and checks that the answer is the one expected.
func (p *formPoster) post(ctx context.Context, key string, body []byte, want int) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+p.token)
	h.Set("Idempotency-Key", key)
	for {
		a, err := p.c.post(ctx, formsPath, h, body)
		if err != nil {
			if ctx.Err() == nil {
				p.runs.fail("form %s: %v", key, err)
			}
			return
		}
		p.mu.Lock()
		p.stats.Posts++
		switch a.status {
		case http.StatusCreated:
			if a.header.Get("Idempotent-Replayed") == "true" {
				p.stats.Replayed++
			} else {
				p.stats.Created++
			}
		case http.StatusConflict:
			p.stats.InProgress++
		case http.StatusUnprocessableEntity:
			p.stats.KeyReused++
		}
		p.mu.Unlock()
		switch {
		case a.status == http.StatusConflict:
			if waitRetryAfter(ctx, a.header) != nil {
				return
			}
			continue
		case a.status != want:
			p.runs.fail("form %s: answered %d, want %d: %s", key, a.status, want, oneLine(string(a.body), 200))
		case a.status == http.StatusCreated:
			var run struct {
				ID int64 `json:"id"`
			}
			if err := json.Unmarshal(a.body, &run); err != nil || run.ID == 0 {
				p.runs.fail("form %s: 201 without a run id: %s", key, oneLine(string(a.body), 200))
				return
			}
			p.runs.add(key, run.ID)
		}
		return
	}
}

func (p *formPoster) Stats() FormStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}
