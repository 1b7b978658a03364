package onceflowui

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/keytmpl"
)

// revealed is a value shown once, on the page that answers the reveal.
type revealed struct {
	Field, Value string
}

// masked lists the paths of the values masked whole in the run's page: in its input, its
// steps' outputs and its corrections' changes, as Client.Reveal names them.
func (d *runData) maskedFields() []string {
	var out []string
	maskedLeaves("input", d.Run.Input, &out)
	for _, st := range d.Steps {
		if len(st.Step.Output) > 0 {
			maskedLeaves("steps."+st.Step.Name+".output", st.Step.Output, &out)
		}
	}
	for _, rv := range d.Revisions {
		for _, ch := range rv.Changes {
			if ch.Masked {
				out = append(out, ch.RevealBefore, ch.RevealAfter)
			}
		}
	}
	return out
}

// maskedLeaves appends the paths under prefix of the masked values of a masked document.
func maskedLeaves(prefix string, raw []byte, out *[]string) {
	v, err := keytmpl.Decode(raw)
	if err != nil {
		return
	}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(p+"."+k, t[k])
			}
		case []any:
			for i, x := range t {
				walk(p+"."+strconv.Itoa(i), x)
			}
		case string:
			if t == "[redacted]" && onceflow.Revealable(p) {
				*out = append(*out, p)
			}
		}
	}
	walk(prefix, v)
}

// runReveal is POST /ui/runs/{id}/reveal (field, reason): an admin sees the clear value
// of one masked field of the run, once, on the page this answers — the reveal is in the
// audit trail first (data.revealed: who, the field, why; never the value). A read session
// is refused before anything is read.
func (c *Console) runReveal(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	field, reason := strings.TrimSpace(r.PostForm.Get("field")), strings.TrimSpace(r.PostForm.Get("reason"))
	rv, err := c.cfg.Client.Reveal(r.Context(), onceflow.RevealRequest{RunID: id, Field: field, Reason: reason, Actor: sessionFrom(r).Actor()})
	var problem string
	switch {
	case errors.Is(err, onceflow.ErrNotFound):
		return &pageError{Status: http.StatusNotFound, Title: "Run not found", Detail: fmt.Sprintf("run %d does not exist", id)}
	case errors.Is(err, onceflow.ErrUnavailable):
		return err
	case err != nil:
		problem = strings.TrimPrefix(err.Error(), "onceflow: ")
	}
	d, err := c.loadRun(r.Context(), id)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if problem != "" {
		d.RevealError, status = problem, http.StatusBadRequest
	} else {
		d.Revealed = &revealed{Field: rv.Field, Value: pretty(rv.Value)}
		c.log.Info("console value revealed", "run_id", id, "actor", sessionFrom(r).Actor(), "field", field)
	}
	c.render(w, r, status, "run", d)
	return nil
}
