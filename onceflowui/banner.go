package onceflowui

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/onceflow/onceflow"
)

// A banner is the sentence shown above a page after an action. The redirect that follows
// the action names it by a code (?done=CODE), never by its text: the page builds the
// sentence from that code and from what the server holds now, so that a link cannot make
// the console say anything of its own. An unknown code, or one the page's state does not
// bear out (a "paused" banner for a workflow that is not paused), shows nothing.
type bannerCode string

// Banner codes.
const (
	doneCancelled     bannerCode = "cancelled"
	donePaused        bannerCode = "paused"
	doneAlreadyPaused bannerCode = "already_paused"
	doneResumed       bannerCode = "resumed"
	doneNotPaused     bannerCode = "not_paused"
	doneRetried       bannerCode = "retried"
	doneResolved      bannerCode = "resolved"
	doneResolvedKept  bannerCode = "resolved_kept"
	doneResolvedNoKey bannerCode = "resolved_no_key"
	doneAbandoned     bannerCode = "abandoned"
	doneReplayed      bannerCode = "replayed"
)

// doneURL is path with the banner code of an action, and the query members q (names the
// page checks against its state, never text to show).
func doneURL(path string, code bannerCode, q ...string) string {
	v := url.Values{"done": {string(code)}}
	for i := 0; i+1 < len(q); i += 2 {
		v.Set(q[i], q[i+1])
	}
	return path + "?" + v.Encode()
}

// bannered is page data that can say what a banner code means for it.
type bannered interface {
	banner(code bannerCode, q url.Values) string
}

// bannerOf is the banner of the request's ?done= for the page's data, or "".
func bannerOf(data any, q url.Values) string {
	code := q.Get("done")
	if code == "" {
		return ""
	}
	b, ok := data.(bannered)
	if !ok {
		return ""
	}
	return b.banner(bannerCode(code), q)
}

// banner of the overview: a pause or a resume of the workflow ?workflow= names, if it is
// one the overview shows and its state agrees.
func (d overviewData) banner(code bannerCode, q url.Values) string {
	wf := q.Get("workflow")
	if !slices.Contains(d.Workflows, wf) {
		return ""
	}
	_, paused := d.Paused[wf]
	switch {
	case code == donePaused && paused:
		return fmt.Sprintf("Paused %s: its steps are not claimed until it is resumed; steps already running finish.", wf)
	case code == doneAlreadyPaused && paused:
		return fmt.Sprintf("Workflow %s was already paused; nothing changed.", wf)
	case code == doneResumed && !paused:
		return fmt.Sprintf("Resumed %s: its steps are claimed again.", wf)
	case code == doneNotPaused && !paused:
		return fmt.Sprintf("Workflow %s was not paused; nothing changed.", wf)
	}
	return ""
}

// banner of a run's page: its cancellation, named by the steps that are cancelled now.
func (d *runData) banner(code bannerCode, _ url.Values) string {
	if code != doneCancelled {
		return ""
	}
	var cancelled, running []string
	for _, s := range d.Steps {
		if s.Step.State != onceflow.StateCancelled {
			continue
		}
		cancelled = append(cancelled, s.Step.Name)
		if s.Step.LeaseOwner != "" && s.Step.LeaseExpiresAt.After(d.Now) {
			running = append(running, s.Step.Name)
		}
	}
	if len(cancelled) == 0 {
		return ""
	}
	out := fmt.Sprintf("Cancelled: %s will not run.", strings.Join(cancelled, ", "))
	if len(running) > 0 {
		out += fmt.Sprintf(" Still running: %s; the attempt is recorded when it ends.", strings.Join(running, ", "))
	}
	return out
}

// banner of a review item's page: the decision taken, if the step is no longer in review.
func (d *itemData) banner(code bannerCode, _ url.Values) string {
	st := d.It.State
	if st == onceflow.StateNeedsReview {
		return ""
	}
	switch code {
	case doneRetried:
		return "Retried: the step is due again."
	case doneResolved:
		if st == onceflow.StateCompleted {
			return "Resolved by hand; ledger: the effect key is recorded completed with the output."
		}
	case doneResolvedKept:
		if st == onceflow.StateCompleted {
			return "Resolved by hand; ledger: the effect key was already completed, and its result is kept."
		}
	case doneResolvedNoKey:
		if st == onceflow.StateCompleted {
			return "Resolved by hand; the step had no effect key to record."
		}
	case doneAbandoned:
		if st == onceflow.StateFailed {
			return "Abandoned: the step failed and the steps that need it were cancelled."
		}
	case doneReplayed:
		return "Replayed: the step is pending again; the run's page shows a correction as an input revision with its diff."
	}
	return ""
}
