package onceflowhttp

import (
	"net/http"
	"strconv"

	"github.com/onceflow/onceflow/onceflowhttp/apiv1"
)

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
		Schedules []apiv1.Schedule `json:"schedules"`
	}{Schedules: []apiv1.Schedule{}}
	if s.cfg.Client != nil {
		infos, err := s.cfg.Client.Schedules(r.Context(), n)
		if err != nil {
			return err
		}
		for _, in := range infos {
			out.Schedules = append(out.Schedules, apiv1.NewSchedule(in))
		}
	}
	return writeJSON(w, http.StatusOK, out)
}
