package onceflowui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/jsondoc"
	"github.com/onceflow/onceflow/internal/keytmpl"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// overviewData is the overview page.
type overviewData struct {
	// Workflows are the registered workflows, those with runs and the paused ones.
	Workflows []string
	// Paused are the paused workflows' pauses, by name, their notes masked.
	Paused map[string]onceflow.WorkflowPause
	States []onceflow.State
	// Runs counts runs by workflow and state.
	Runs     map[string]map[onceflow.State]int64
	RunTotal map[string]int64
	Review   []onceflow.ReviewCount
	ReviewN  int64
	Due      map[string]int64
	// Hour is the last hour's activity, Buckets the same in 5-minute slices, oldest
	// first.
	Hour     activity
	Buckets  []bucket
	MaxBar   int
	Failures []apiv1.AuditEntry
}

func (overviewData) title() string { return "Overview" }

type activity struct {
	Started, Completed, Retried, Parked, Failed int
}

type bucket struct {
	From time.Time
	activity
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	now := c.cfg.Now()
	st, err := c.cfg.Client.RunStats(ctx)
	if err != nil {
		return err
	}
	paused, err := c.cfg.Client.PausedWorkflows(ctx)
	if err != nil {
		return err
	}
	d := overviewData{States: onceflow.States(), Paused: map[string]onceflow.WorkflowPause{}, Runs: map[string]map[onceflow.State]int64{},
		RunTotal: map[string]int64{}, Due: map[string]int64{}}
	seen := map[string]bool{}
	addWF := func(wf string) {
		if !seen[wf] {
			seen[wf] = true
			d.Workflows = append(d.Workflows, wf)
		}
	}
	for _, wf := range c.cfg.Client.Workflows() {
		addWF(wf)
	}
	for _, wp := range paused {
		addWF(wp.Workflow)
		d.Paused[wp.Workflow] = wp
	}
	for _, rc := range st.Runs {
		addWF(rc.Workflow)
		if d.Runs[rc.Workflow] == nil {
			d.Runs[rc.Workflow] = map[onceflow.State]int64{}
		}
		d.Runs[rc.Workflow][rc.State] += rc.Count
		d.RunTotal[rc.Workflow] += rc.Count
	}
	slices.Sort(d.Workflows)
	d.Review = st.Review
	for _, rc := range st.Review {
		d.ReviewN += rc.Count
	}
	for _, dc := range st.Due {
		d.Due[dc.Workflow] = dc.Count
	}

	since := now.Add(-time.Hour).Truncate(5 * time.Minute).Add(5 * time.Minute)
	for t := since.Add(-5 * time.Minute); t.Before(now); t = t.Add(5 * time.Minute) {
		d.Buckets = append(d.Buckets, bucket{From: t})
	}
	// The counts come from queries that count, however many events the hour holds.
	act, err := c.cfg.Client.Activity(ctx, onceflow.ActivityQuery{Since: d.Buckets[0].From, Bucket: 5 * time.Minute, Failures: 10})
	if err != nil {
		return err
	}
	for _, ab := range act.Buckets {
		if ab.Slice < 0 || ab.Slice >= len(d.Buckets) {
			continue
		}
		d.Buckets[ab.Slice].activity = activity{Started: int(ab.Started), Completed: int(ab.Completed), Retried: int(ab.Retried),
			Parked: int(ab.Parked), Failed: int(ab.Failed)}
	}
	for _, b := range d.Buckets {
		d.Hour.Started += b.Started
		d.Hour.Completed += b.Completed
		d.Hour.Retried += b.Retried
		d.Hour.Parked += b.Parked
		d.Hour.Failed += b.Failed
		d.MaxBar = max(d.MaxBar, b.Completed, b.Parked+b.Failed)
	}
	for _, e := range act.Failures {
		d.Failures = append(d.Failures, apiv1.NewAuditEntry(e))
	}
	c.render(w, r, http.StatusOK, "overview", d)
	return nil
}

// runsData is the runs page.
type runsData struct {
	Filter     runFilter
	Workflows  []string
	States     []onceflow.State
	Runs       []*onceflow.Run
	NextBefore int64
	Error      string
	// Live is the query of the list's live region: the filter, and the page it shows.
	Live string
}

type runFilter struct {
	Workflow, State, Entity, Key, Since, Until string
}

func (runsData) title() string { return "Runs" }

// runs is GET /ui/runs?workflow=&state=&entity=&key=&since=&until=&before=.
func (c *Console) runs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := runFilter{Workflow: q.Get("workflow"), State: q.Get("state"), Entity: strings.TrimSpace(q.Get("entity")),
		Key: strings.TrimSpace(q.Get("key")), Since: q.Get("since"), Until: q.Get("until")}
	d := runsData{Filter: f, Workflows: c.cfg.Client.Workflows(), States: onceflow.States(), Live: liveQuery(q)}
	p := onceflow.RunFilter{Workflow: f.Workflow, Entity: f.Entity, RunKey: f.Key, Limit: 50}
	status := http.StatusOK
	bad := func(msg string) {
		d.Error, status = msg, http.StatusBadRequest
	}
	if f.State != "" {
		if !onceflow.State(f.State).Valid() {
			bad(fmt.Sprintf("state %q is not one of %v", f.State, onceflow.States()))
		}
		p.State = onceflow.State(f.State)
	}
	var err error
	if p.CreatedSince, err = formTime(f.Since); err != nil {
		bad("since: " + err.Error())
	}
	if p.CreatedUntil, err = formTime(f.Until); err != nil {
		bad("until: " + err.Error())
	}
	if v := q.Get("before"); v != "" {
		if p.BeforeID, err = strconv.ParseInt(v, 10, 64); err != nil || p.BeforeID <= 0 {
			bad("before must be a positive run ID")
		}
	}
	if d.Error == "" {
		if d.Runs, err = c.cfg.Client.RunList(r.Context(), p); err != nil {
			return err
		}
		if len(d.Runs) == p.Limit {
			d.NextBefore = d.Runs[len(d.Runs)-1].ID
		}
	}
	c.render(w, r, status, "runs", d)
	return nil
}

// liveQuery is the query a list's live region asks again: q without the one-time banner.
func liveQuery(q url.Values) string {
	v := url.Values{}
	for k, x := range q {
		if k != "done" {
			v[k] = x
		}
	}
	return v.Encode()
}

// formTime reads a time from a form: RFC 3339, or the browser's datetime-local form
// (taken as UTC).
func formTime(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time such as 2026-03-01T09:00 (UTC) or 2026-03-01T09:00:00+01:00", v)
}

// runData is a run's page.
type runData struct {
	Run       *onceflow.Run
	Input     string
	Graph     graph
	Steps     []stepRow
	Events    []apiv1.AuditEntry
	Revisions []revisionRow
	Live      bool
	// Cancellable is set while a step of the run is still to be done or decided.
	Cancellable bool
	// Masked lists the masked values an admin may reveal; Revealed is the value a reveal
	// answered with (shown on that page only), RevealError why a reveal was refused.
	Masked      []string
	Revealed    *revealed
	RevealError string
	// Paused is the pause of the run's workflow, when it is paused: no step of it is
	// claimed until it is resumed, whatever its next attempt says.
	Paused *onceflow.WorkflowPause
	// Now is when the page was read, to tell a running attempt by its lease.
	Now time.Time
}

func (d runData) title() string { return fmt.Sprintf("Run %d", d.Run.ID) }

type stepRow struct {
	Step      *onceflow.StepInfo
	LastError string
	Output    string
	Attempts  []attemptRow
	NextAt    time.Time
}

type attemptRow struct {
	A        *onceflow.AttemptInfo
	Error    string
	Excerpt  string
	Duration string
}

type revisionRow struct {
	Rev     *onceflow.Revision
	Note    string
	Changes []change
	Patch   string
}

// change is one field a correction changed. A masked field's change is Masked, its
// values not shown: RevealBefore and RevealAfter name them for a reveal.
type change struct {
	Path, Before, After       string
	Masked                    bool
	RevealBefore, RevealAfter string
}

func pathID(r *http.Request, name string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, &pageError{Status: http.StatusBadRequest, Title: "Invalid run ID", Detail: "a run ID is a positive integer"}
	}
	return id, nil
}

// pathRun reads the run the path's {id} names.
func (c *Console) pathRun(r *http.Request) (*runData, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	return c.loadRun(r.Context(), id)
}

// loadRun reads everything a run's page shows through the client, masked as the API
// masks GET /v1/runs/{id}.
func (c *Console) loadRun(ctx context.Context, id int64) (*runData, error) {
	rd, err := c.cfg.Client.RunGet(ctx, id)
	if errors.Is(err, onceflow.ErrNotFound) {
		return nil, &pageError{Status: http.StatusNotFound, Title: "Run not found", Detail: fmt.Sprintf("run %d does not exist", id)}
	}
	if err != nil {
		return nil, err
	}
	entries, err := c.cfg.Client.Audit(ctx, onceflow.AuditQuery{RunID: id})
	if err != nil {
		return nil, err
	}
	d := &runData{Run: rd.Run, Input: pretty(rd.Run.Input), Now: c.cfg.Now()}
	ordered := rd.DependencyOrder()
	d.Graph = layout(ordered)
	for _, st := range ordered {
		row := stepRow{Step: st, LastError: st.LastError}
		if len(st.Output) > 0 {
			row.Output = pretty(st.Output)
		}
		if st.State == onceflow.StateRetrying || (st.State == onceflow.StatePending && !st.NextAt.IsZero() && st.Waiting == 0) {
			row.NextAt = st.NextAt
		}
		for _, a := range rd.Attempts {
			if a.StepID == st.ID {
				row.Attempts = append(row.Attempts, viewAttempt(a))
			}
		}
		d.Steps = append(d.Steps, row)
		if cancellable(st.State) {
			d.Cancellable = true
		}
		if !finished(st.State) {
			d.Live = true
		}
	}
	for _, e := range entries {
		d.Events = append(d.Events, apiv1.NewAuditEntry(e))
	}
	if d.Live {
		paused, err := c.cfg.Client.PausedWorkflows(ctx)
		if err != nil {
			return nil, err
		}
		for _, wp := range paused {
			if wp.Workflow == d.Run.Workflow {
				d.Paused = &wp
			}
		}
	}
	for _, rv := range rd.Revisions {
		d.Revisions = append(d.Revisions, revisionRow{Rev: rv, Note: rv.Note, Patch: pretty(rv.Diff),
			Changes: maskedChanges(rv, diff(rv.InputBefore, rv.InputAfter))})
	}
	d.Masked = d.maskedFields()
	return d, nil
}

func viewAttempt(a *onceflow.AttemptInfo) attemptRow {
	row := attemptRow{A: a, Error: a.Error, Excerpt: a.ResponseExcerpt}
	if !a.InFlight() {
		row.Duration = a.EndedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
	}
	return row
}

// finished reports whether a step's state will not change without a person.
func finished(s onceflow.State) bool {
	switch s {
	case onceflow.StateCompleted, onceflow.StateFailed, onceflow.StateSkipped, onceflow.StateCancelled, onceflow.StateNeedsReview:
		return true
	}
	return false
}

func (c *Console) run(w http.ResponseWriter, r *http.Request) error {
	d, err := c.pathRun(r)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "run", d)
	return nil
}

// runLive is GET /ui/runs/{id}/live: the part of the run's page that changes.
func (c *Console) runLive(w http.ResponseWriter, r *http.Request) error {
	d, err := c.pathRun(r)
	if err != nil {
		return err
	}
	return c.renderFragment(w, r, "run", "live", d)
}

// keysData is the key lookup page.
type keysData struct {
	Key    string
	Error  string
	Report *apiv1.Key
}

func (keysData) title() string { return "Effect keys" }

// keys is GET /ui/keys?key=: did this business action happen?
func (c *Console) keys(w http.ResponseWriter, r *http.Request) error {
	d := keysData{Key: strings.TrimSpace(r.URL.Query().Get("key"))}
	status := http.StatusOK
	if d.Key != "" {
		if err := onceflow.ValidateKey("effect key", d.Key); err != nil {
			d.Error, status = err.Error(), http.StatusBadRequest
		} else {
			rep, err := c.cfg.Client.Key(r.Context(), d.Key)
			if err != nil {
				return err
			}
			v := apiv1.NewKey(rep, func(runID int64, step string) string {
				return c.cfg.Prefix + "/runs/" + strconv.FormatInt(runID, 10) + "#step-" + url.PathEscape(step)
			})
			d.Report = &v
		}
	}
	c.render(w, r, status, "keys", d)
	return nil
}

// pretty indents a JSON document for reading; anything else, and a document nested more
// than jsondoc.MaxIndentDepth levels deep (whose indentation would cost the square of its
// depth), is returned as it is.
func pretty(raw []byte) string {
	if len(raw) == 0 || jsondoc.Depth(raw) > jsondoc.MaxIndentDepth {
		return string(raw)
	}
	v, err := keytmpl.Decode(raw) // numbers as stored: an id above 2^53 keeps its digits
	if err != nil {
		return string(raw)
	}
	b, err := encodeJSON(v, "  ")
	if err != nil {
		return string(raw)
	}
	return b
}

// encodeJSON encodes v as the characters it holds: "Müller & Söhne <GmbH>", not
// "\u0026 … \u003c". The JSON encoder's HTML escaping is off because the templates
// escape every value for where it is written (html/template), which is what keeps a
// document inert in a page; indent, when set, indents it.
func encodeJSON(v any, indent string) (string, error) {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// maskedChanges adds to the changes a masked diff shows those of rv's changed fields whose
// masked values look alike, as masked changes, in path order.
func maskedChanges(rv *onceflow.Revision, shown []change) []change {
	for _, p := range rv.Changed {
		if slices.ContainsFunc(shown, func(c change) bool { return c.Path == p }) {
			continue
		}
		n := strconv.Itoa(rv.Revision)
		shown = append(shown, change{Path: p, Masked: true, RevealBefore: "revisions." + n + ".before." + p, RevealAfter: "revisions." + n + ".after." + p})
	}
	slices.SortFunc(shown, func(a, b change) int { return strings.Compare(a.Path, b.Path) })
	return shown
}

// diff lists the fields that differ between two JSON documents, by path.
func diff(before, after []byte) []change {
	a, _ := keytmpl.Decode(before)
	b, _ := keytmpl.Decode(after)
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	var paths []string
	for p := range fa {
		paths = append(paths, p)
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var out []change
	for _, p := range paths {
		if fa[p] != fb[p] {
			out = append(out, change{Path: p, Before: fa[p], After: fb[p]})
		}
	}
	return out
}

func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 && prefix != "" {
			out[prefix] = "{}"
		}
		for k, x := range t {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, x, out)
		}
	default:
		b, _ := encodeJSON(t, "")
		if prefix == "" {
			prefix = "(input)"
		}
		out[prefix] = b
	}
}
