package onceflowui

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

// auditFilter is the audit page's form, as typed.
type auditFilter struct {
	Actor, Type, Workflow, Entity, Run, Key, Since, Until string
}

// query returns the filter as URL parameters (empty ones left out), with extra set.
func (f auditFilter) query(extra ...string) string {
	v := url.Values{}
	for k, x := range map[string]string{"actor": f.Actor, "type": f.Type, "workflow": f.Workflow, "entity": f.Entity, "run": f.Run,
		"key": f.Key, "since": f.Since, "until": f.Until} {
		if x != "" {
			v.Set(k, x)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v.Encode()
}

// auditData is the audit page.
type auditData struct {
	Filter    auditFilter
	Workflows []string
	// Types are the event types offered as the type field's suggestions.
	Types  []onceflow.EventType
	Events []apiv1.AuditEntry
	// ExportCSV, ExportJSON and Newest are the exports of the filter and its first page;
	// Older the page of older events, "" on the last page.
	ExportCSV, ExportJSON, Newest string
	Older                         string
	// Paged is set on a page after the first.
	Paged bool
	Error string
}

func (auditData) title() string { return "Audit trail" }

// auditPage is the number of events the audit page shows at once.
const auditPage = 50

// defaultMaxExport is Config.MaxExport's default: an export holds the newest events its
// filter selects, up to this many.
const defaultMaxExport = 100_000

// eventTypeForm is the form of an event type: lower-case words joined by dots.
var eventTypeForm = regexp.MustCompile(`^[a-z][a-z_]*(\.[a-z][a-z_]*)+$`)

// auditTypes are the event types the type field suggests: what people and the engine
// record. Any other type may be typed.
var auditTypes = []onceflow.EventType{
	onceflow.EventConsoleSignedIn, onceflow.EventConsoleSignedOut, onceflow.EventDataUnmasked, onceflow.EventDataRevealed,
	"workflow.paused", "workflow.resumed", "run.cancelled", "run.input_corrected",
	"review.retried", "review.resolved", "review.abandoned", "review.replayed", "retention.purged",
	onceflow.EventRunCreated, "run.deduplicated", "run.state_changed", "step.claimed", onceflow.EventStepCompleted,
	onceflow.EventStepRetryPlanned, onceflow.EventStepNeedsReview, onceflow.EventStepFailed, "step.cancelled", "step.skipped",
	"step.delayed", "effect.reused", "effect.waiting", "effect.key_conflict", "lease.expired", "schedule.tick_late",
	"schedule.tick_skipped", "entity.transitioned", "entity.transition_refused", "incident.opened", "incident.closed",
}

// auditQuery reads the audit page's filter from q: the query, or a message saying what to
// fix.
func auditQuery(q url.Values) (auditFilter, onceflow.AuditQuery, string) {
	f := auditFilter{Actor: strings.TrimSpace(q.Get("actor")), Type: strings.TrimSpace(q.Get("type")), Workflow: q.Get("workflow"),
		Entity: strings.TrimSpace(q.Get("entity")), Run: strings.TrimSpace(q.Get("run")), Key: strings.TrimSpace(q.Get("key")),
		Since: strings.TrimSpace(q.Get("since")), Until: strings.TrimSpace(q.Get("until"))}
	aq := onceflow.AuditQuery{Actor: f.Actor, Workflow: f.Workflow, Entity: f.Entity, EffectKey: f.Key, Newest: true}
	for name, v := range map[string]string{"actor": f.Actor, "workflow": f.Workflow, "entity": f.Entity, "effect key": f.Key} {
		if len(v) > 255 {
			return f, aq, name + " is longer than 255 bytes"
		}
	}
	for t := range strings.SplitSeq(f.Type, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !eventTypeForm.MatchString(t) {
			return f, aq, fmt.Sprintf("type %q is not an event type such as run.cancelled or review.retried", clipText(t, 80))
		}
		aq.Types = append(aq.Types, onceflow.EventType(t))
	}
	var err error
	if f.Run != "" {
		if aq.RunID, err = strconv.ParseInt(f.Run, 10, 64); err != nil || aq.RunID <= 0 {
			return f, aq, "run must be a run ID, a positive integer"
		}
	}
	if aq.Since, err = formTime(f.Since); err != nil {
		return f, aq, "since: " + err.Error()
	}
	if aq.Until, err = formTime(f.Until); err != nil {
		return f, aq, "until: " + err.Error()
	}
	if !aq.Since.IsZero() && !aq.Until.IsZero() && !aq.Until.After(aq.Since) {
		return f, aq, "until must be after since"
	}
	if v := q.Get("before"); v != "" {
		if aq.BeforeID, err = strconv.ParseInt(v, 10, 64); err != nil || aq.BeforeID <= 0 {
			return f, aq, "before must be a positive event ID"
		}
	}
	return f, aq, ""
}

// audit is GET /ui/audit?actor=&type=&workflow=&entity=&run=&key=&since=&until=&before=:
// the events the filter selects, newest first, a page at a time.
func (c *Console) audit(w http.ResponseWriter, r *http.Request) error {
	f, aq, problem := auditQuery(r.URL.Query())
	p := c.cfg.Prefix + "/audit"
	d := auditData{Filter: f, Workflows: c.cfg.Client.Workflows(), Types: auditTypes, ExportCSV: p + "/export.csv?" + f.query(),
		ExportJSON: p + "/export.json?" + f.query(), Newest: p + "?" + f.query(), Paged: aq.BeforeID > 0, Error: problem}
	status := http.StatusOK
	if problem != "" {
		status = http.StatusBadRequest
	} else {
		aq.Limit = auditPage
		entries, err := c.cfg.Client.Audit(r.Context(), aq)
		if err != nil {
			return err
		}
		for _, e := range entries {
			d.Events = append(d.Events, apiv1.NewAuditEntry(e))
		}
		if len(entries) == aq.Limit {
			d.Older = p + "?" + f.query("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		}
	}
	c.render(w, r, status, "audit", d)
	return nil
}

// auditExport is GET /ui/audit/export.{csv,json} with the audit page's filter: the events
// it selects, newest first, masked as the page shows them, up to Config.MaxExport of them. The
// answer is written as the events are read, a page at a time; an export that stops at the
// bound says so in its last record.
func (c *Console) auditExport(format string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		_, aq, problem := auditQuery(r.URL.Query())
		if problem != "" {
			return &pageError{Status: http.StatusBadRequest, Title: "Invalid filter", Detail: problem}
		}
		aq.Limit = 1000
		// The first page is read before anything is written, so that a database that
		// cannot be reached is an error page, not a truncated file.
		page, err := c.cfg.Client.Audit(r.Context(), aq)
		if err != nil {
			return err
		}
		out := newExportWriter(w, format)
		n := 0
		for len(page) > 0 {
			for _, e := range page {
				if n == c.cfg.MaxExport {
					out.truncated(n)
					return out.close()
				}
				if err := out.entry(apiv1.NewAuditEntry(e)); err != nil {
					return nil // the client went away; nothing more to say
				}
				n++
			}
			if len(page) < aq.Limit {
				break
			}
			aq.BeforeID = page[len(page)-1].ID
			if page, err = c.cfg.Client.Audit(r.Context(), aq); err != nil {
				c.log.Warn("audit export stopped: the next page could not be read", "events_written", n, "error", err)
				out.failed()
				return out.close()
			}
		}
		return out.close()
	}
}

// exportWriter writes an export's records as CSV or as one JSON document.
type exportWriter struct {
	w      http.ResponseWriter
	format string
	csv    *csv.Writer
	enc    *json.Encoder
	n      int
	// ended is set once the JSON document is closed.
	ended bool
}

func newExportWriter(w http.ResponseWriter, format string) *exportWriter {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", `attachment; filename="onceflow-audit.`+format+`"`)
	x := &exportWriter{w: w, format: format}
	if format == "csv" {
		h.Set("Content-Type", "text/csv; charset=utf-8")
		x.csv = csv.NewWriter(w)
		_ = x.csv.Write([]string{"id", "at", "type", "workflow", "run_id", "entity", "step", "effect_key", "attempt", "actor", "reason", "why", "detail"})
	} else {
		h.Set("Content-Type", "application/json")
		x.enc = json.NewEncoder(w)
		x.enc.SetEscapeHTML(false)
		_, _ = fmt.Fprint(w, `{"events":[`)
	}
	return x
}

// entry writes one event.
func (x *exportWriter) entry(e apiv1.AuditEntry) error {
	defer func() { x.n++ }()
	if x.csv != nil {
		run := ""
		if e.RunID > 0 {
			run = strconv.FormatInt(e.RunID, 10)
		}
		attempt := ""
		if e.Attempt > 0 {
			attempt = strconv.Itoa(e.Attempt)
		}
		err := x.csv.Write([]string{strconv.FormatInt(e.ID, 10), e.At.UTC().Format("2006-01-02T15:04:05.000000Z"), cell(e.Type), cell(e.Workflow), run,
			cell(e.Entity), cell(e.Step), cell(e.EffectKey), attempt, cell(e.Actor), cell(e.Reason), cell(e.Why), cell(string(e.Detail))})
		if x.n%100 == 99 {
			x.csv.Flush()
			err = x.csv.Error()
		}
		return err
	}
	if x.n > 0 {
		if _, err := fmt.Fprint(x.w, ","); err != nil {
			return err
		}
	}
	return x.enc.Encode(e)
}

// truncated ends an export that stopped at its bound of n events with a record that says so.
func (x *exportWriter) truncated(n int) {
	x.end(fmt.Sprintf("the export stops at the newest %d events the filter selects; narrow the filter or its time range for the rest", n))
}

// failed ends an export whose next page could not be read with a record that says so.
func (x *exportWriter) failed() {
	x.end("the export stopped early: the database could not be read; the events above are complete, export again for the rest")
}

func (x *exportWriter) end(why string) {
	if x.csv != nil {
		_ = x.csv.Write([]string{"", "", "export.incomplete", "", "", "", "", "", "", "", "", why, ""})
		return
	}
	_, _ = fmt.Fprintf(x.w, `],"complete":false,"note":%s}`+"\n", quoteJSON(why))
	x.ended = true
}

func (x *exportWriter) close() error {
	if x.csv != nil {
		x.csv.Flush()
		return nil
	}
	if !x.ended {
		_, _ = fmt.Fprint(x.w, `],"complete":true}`+"\n")
	}
	return nil
}

// cell keeps a spreadsheet from reading a value as a formula: a value that starts with =,
// +, -, @ or a tab or carriage return gets a leading apostrophe.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// clipText shortens s to n runes for a message.
func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
