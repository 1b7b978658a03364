package onceflowhttp

import (
	"net/http"
	"strconv"
	"time"
)

// scheduleView is a schedule as GET /v1/schedules shows it.
type scheduleView struct {
	Name       string      `json:"name"`
	Workflow   string      `json:"workflow"`
	Cron       string      `json:"cron"`
	Timezone   string      `json:"timezone"`
	RunKey     string      `json:"run_key"`
	CatchUp    string      `json:"catch_up"`
	MaxCatchUp int         `json:"max_catch_up"`
	ForEach    bool        `json:"for_each"`
	Next       []time.Time `json:"next"`
	LastTick   *time.Time  `json:"last_tick"`
	LastRunID  int64       `json:"last_run_id,omitempty"`
}

// listSchedules serves GET /v1/schedules: every registered schedule, its next ticks in its
// zone (?next=N, default 3, at most 100), the last tick fired and its run.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	n := 3
	if v := r.URL.Query().Get("next"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 || k > 100 {
			return newProblem(http.StatusBadRequest, "invalid-parameter", "Invalid parameter", "next must be an integer from 0 to 100")
		}
		n = k
	}
	out := struct {
		Schedules []scheduleView `json:"schedules"`
	}{Schedules: []scheduleView{}}
	if s.cfg.Client != nil {
		infos, err := s.cfg.Client.Schedules(r.Context(), n)
		if err != nil {
			return err
		}
		for _, in := range infos {
			v := scheduleView{Name: in.Name, Workflow: in.Workflow, Cron: in.Cron, Timezone: in.Timezone, RunKey: in.RunKey,
				CatchUp: string(in.CatchUp), MaxCatchUp: in.MaxCatchUp, ForEach: in.ForEach, Next: in.Next, LastRunID: in.LastRunID}
			if v.Next == nil {
				v.Next = []time.Time{}
			}
			if !in.LastTick.IsZero() {
				t := in.LastTick
				v.LastTick = &t
			}
			out.Schedules = append(out.Schedules, v)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}
