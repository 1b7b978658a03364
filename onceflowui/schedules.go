package onceflowui

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// schedulesData is the schedules page.
type schedulesData struct {
	Schedules []scheduleRow
}

func (schedulesData) title() string { return "Schedules" }

// scheduleRow is one schedule: what Client.Schedules says, its next ticks in its own zone,
// the catch-up decisions of the audit trail and, after "preview", what a trigger will do.
type scheduleRow struct {
	Info     onceflow.ScheduleInfo
	Next     []template.HTML
	LastTick template.HTML
	Through  template.HTML
	// Decisions are the latest catch-up decisions (ticks started late, ticks skipped),
	// newest first; More counts the older ones left out.
	Decisions []apiv1.AuditEntry
	More      int
	// At is the tick time typed for a trigger; Preview what triggering it will do, and
	// Error why it cannot.
	At      string
	Preview *tickPreview
	Error   string
}

// tickPreview is a TickPlan as the page shows it.
type tickPreview struct {
	Plan *onceflow.TickPlan
	Tick template.HTML
	// At is the tick, RFC 3339, as the confirmation carries it back.
	At string
}

// Schedule pages read this many next ticks, and show this many catch-up decisions.
const (
	scheduleNext      = 5
	scheduleDecisions = 10
)

// schedules is GET /ui/schedules.
func (c *Console) schedules(w http.ResponseWriter, r *http.Request) error {
	d, err := c.loadSchedules(r)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "schedules", d)
	return nil
}

func (c *Console) loadSchedules(r *http.Request) (*schedulesData, error) {
	ctx := r.Context()
	infos, err := c.cfg.Client.Schedules(ctx, scheduleNext)
	if err != nil {
		return nil, err
	}
	d := &schedulesData{}
	for _, in := range infos {
		through := in.Through
		if loc, err := time.LoadLocation(in.Timezone); err == nil {
			through = through.In(loc)
		}
		row := scheduleRow{Info: in, LastTick: zoned(in.LastTick), Through: zoned(through)}
		for _, t := range in.Next {
			row.Next = append(row.Next, zoned(t))
		}
		if row.Decisions, row.More, err = c.catchUps(r, in.Name); err != nil {
			return nil, err
		}
		d.Schedules = append(d.Schedules, row)
	}
	return d, nil
}

// catchUps reads the catch-up decisions of a schedule: the events the scheduler records
// about its entity, schedule:NAME, which are only those of ticks started late or skipped
// (one a tick, at most a few dozen a firing after downtime). The newest come first.
func (c *Console) catchUps(r *http.Request, name string) ([]apiv1.AuditEntry, int, error) {
	var all []*onceflow.AuditEntry
	var after int64
	for {
		evs, err := c.cfg.Client.Audit(r.Context(), onceflow.AuditQuery{Entity: "schedule:" + name, AfterID: after, Limit: 1000})
		if err != nil {
			return nil, 0, err
		}
		for _, e := range evs {
			if e.Type == onceflow.EventScheduleTickSkipped || e.Type == onceflow.EventScheduleTickLate {
				all = append(all, e)
			}
		}
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].ID
		// Only the newest are shown: keep what the page needs while paging on.
		if len(all) > scheduleDecisions {
			all = all[len(all)-scheduleDecisions:]
		}
	}
	var out []apiv1.AuditEntry
	for i := len(all) - 1; i >= 0 && len(out) < scheduleDecisions; i-- {
		out = append(out, apiv1.NewAuditEntry(all[i]))
	}
	return out, max(len(all)-len(out), 0), nil
}

// zoned shows a time in the zone it carries (a schedule's), UTC on hover; the page's
// script leaves it so.
func zoned(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	return template.HTML(`<time class="zoned" datetime="` + t.UTC().Format(time.RFC3339) + `" title="` + utc(t) + `">` +
		template.HTMLEscapeString(t.Format("2006-01-02 15:04:05 MST")) + `</time>`)
}

// scheduleTickForm reads the tick time of a trigger's form: empty (the latest tick), or
// RFC 3339.
func scheduleTickForm(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time such as 2026-11-01T09:00:00+01:00; leave it empty for the latest tick", v)
	}
	return t, nil
}

// schedulePreview is POST /ui/schedules/{name}/preview: the schedules page again, with what
// triggering the tick will do on the schedule's row; nothing is started.
func (c *Console) schedulePreview(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("schedule")
	d, err := c.loadSchedules(r)
	if err != nil {
		return err
	}
	row := d.row(name)
	if row == nil {
		return &pageError{Status: http.StatusNotFound, Title: "Schedule not found", Detail: fmt.Sprintf("no schedule %q is loaded", name)}
	}
	row.At = strings.TrimSpace(r.PostForm.Get("at"))
	status := http.StatusOK
	if at, err := scheduleTickForm(row.At); err != nil {
		status, row.Error = http.StatusUnprocessableEntity, "tick: "+err.Error()
	} else if plan, err := c.cfg.Client.TriggerSchedulePreview(r.Context(), name, at); err != nil {
		if status, err = tickError(err); status == 0 {
			return err
		}
		row.Error = err.Error()
	} else {
		row.Preview = &tickPreview{Plan: plan, Tick: zoned(plan.Tick), At: plan.Tick.Format(time.RFC3339)}
	}
	c.render(w, r, status, "schedules", d)
	return nil
}

// scheduleTrigger is POST /ui/schedules/{name}/trigger, the confirmation of a preview: it
// fires the previewed tick, audited as the signed-in person, provided the tick still
// renders the run key the preview showed (a reload may have changed the schedule since);
// otherwise it starts nothing and says so. A tick whose run exists starts nothing and
// shows that run.
func (c *Console) scheduleTrigger(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("schedule")
	at, err := scheduleTickForm(r.PostForm.Get("at"))
	if err != nil || at.IsZero() {
		return &pageError{Status: http.StatusBadRequest, Title: "Preview first", Detail: "a trigger confirms a preview: it names the tick the preview showed. Nothing was started."}
	}
	plan, err := c.cfg.Client.TriggerSchedulePreview(r.Context(), name, at)
	if err != nil {
		status, terr := tickError(err)
		if status == 0 {
			return err
		}
		return &pageError{Status: status, Title: "Not triggered", Detail: terr.Error() + ". Nothing was started."}
	}
	if want := r.PostForm.Get("run_key"); plan.RunKey != want {
		return &pageError{Status: http.StatusConflict, Title: "The schedule changed since the preview",
			Detail: fmt.Sprintf("the tick now renders run key %s, not %s as previewed; preview again. Nothing was started.", plan.RunKey, want)}
	}
	actor := sessionFrom(r).Actor()
	run, err := c.cfg.Client.TriggerScheduleBy(r.Context(), onceflow.ScheduleTrigger{Name: name, At: plan.Tick, Actor: actor})
	if err != nil {
		status, terr := tickError(err)
		if status == 0 {
			return err
		}
		return &pageError{Status: status, Title: "Not triggered", Detail: terr.Error() + ". Nothing was started."}
	}
	c.log.Info("console schedule triggered", "schedule", name, "tick", plan.Tick.Format(time.RFC3339), "run_id", run.ID,
		"run_key", run.RunKey, "actor", actor, "new", !run.Duplicate)
	http.Redirect(w, r, c.cfg.Prefix+"/runs/"+strconv.FormatInt(run.ID, 10), http.StatusSeeOther)
	return nil
}

// tickError is the status and text of a trigger's error that the person can fix (0 for
// any other).
func tickError(err error) (int, error) {
	switch {
	case errors.Is(err, onceflow.ErrScheduleNotFound):
		return http.StatusNotFound, errors.New(strings.TrimPrefix(err.Error(), "onceflow: "))
	case errors.Is(err, onceflow.ErrNotATick):
		return http.StatusUnprocessableEntity, errors.New(strings.TrimPrefix(err.Error(), "onceflow: "))
	}
	return 0, err
}

func (d *schedulesData) row(name string) *scheduleRow {
	for i := range d.Schedules {
		if d.Schedules[i].Info.Name == name {
			return &d.Schedules[i]
		}
	}
	return nil
}

// scheduleWorkflow is the workflow whose runs the schedule name starts (for a fan-out,
// the runs of its items), which an admin of some workflows must administer to trigger it;
// "" for a schedule that is not loaded.
func (c *Console) scheduleWorkflow(name string) string {
	for _, sd := range c.cfg.Client.ScheduleDefinitions() {
		if sd.Name == name {
			return sd.Workflow
		}
	}
	return ""
}
