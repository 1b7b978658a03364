package examples_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/examples"
	"github.com/onceflow/onceflow/flowfile"
	"github.com/onceflow/onceflow/steps/stdsteps"
	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

// crm is a CRM that answers lead lookups with the lead's current status and counts the
// tasks created, by title.
type crm struct {
	mu     sync.Mutex
	status string
	tasks  map[string]int
}

func (c *crm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/leads/by-external-id/S42":
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "L42", "status": c.status})
	case r.Method == http.MethodPost && r.URL.Path == "/tasks":
		var body struct {
			LeadID string `json:"lead_id"`
			Title  string `json:"title"`
		}
		if json.NewDecoder(r.Body).Decode(&body) != nil || body.LeadID != "L42" {
			http.Error(w, "bad task", http.StatusUnprocessableEntity)
			return
		}
		c.tasks[body.Title]++
		_, _ = w.Write([]byte(`{"id": "T1"}`))
	default:
		http.NotFound(w, r)
	}
}

func (c *crm) set(status string) {
	c.mu.Lock()
	c.status = status
	c.mu.Unlock()
}

func (c *crm) count(title string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tasks[title]
}

// lead-follow-up.yaml, run on an injected clock: the recheck waits 23 hours after the
// lookup and the follow-up one more, neither a moment early; the follow-up's condition
// reads the recheck, so a lead contacted in the meantime gets no task; the reminder goes
// out two hours before the appointment. Each task is created once.
func TestLeadFollowUp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		later     string // the lead's status at the recheck
		followUps int
	}{
		{"still new", "new", 1},
		{"contacted meanwhile", "contacted", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			svc := &crm{status: "new", tasks: map[string]int{}}
			srv := httptest.NewServer(svc)
			defer srv.Close()

			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var mu sync.Mutex
			now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
			t0 := now

			src, err := examples.FS.ReadFile("lead-follow-up.yaml")
			if err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"CRM_URL": srv.URL, "CRM_TOKEN": "crm-token-1"}
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			deps, err := stdsteps.New(stdsteps.Options{Store: st, AllowNet: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Env: lookup})
			if err != nil {
				t.Fatal(err)
			}
			defer deps.Close()
			def, ps := (&flowfile.Reader{Kinds: deps}).Parse("lead-follow-up.yaml", src)
			if len(ps) > 0 {
				t.Fatal(ps)
			}
			wfs, err := flowfile.NewBuilder(flowfile.BuildOptions{Store: st, Env: lookup}).Workflows([]*flowfile.Definition{def})
			if err != nil {
				t.Fatal(err)
			}
			c, err := onceflow.New(onceflow.Config{Store: st, Clock: clock, ClockSync: -1})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Register(wfs[0]); err != nil {
				t.Fatal(err)
			}
			run, err := c.Start(ctx, "lead-follow-up", "follow-up:S42", map[string]any{"submission_id": "S42",
				"appointment_at": t0.Add(72 * time.Hour).Format(time.RFC3339)})
			if err != nil {
				t.Fatal(err)
			}
			work := func() int {
				total := 0
				for {
					n, err := c.Work(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						return total
					}
					total += n
				}
			}
			steps := func() map[string]*store.Step {
				list, err := st.StepListByRun(ctx, run.ID)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]*store.Step{}
				for _, s := range list {
					out[s.Name] = s
				}
				return out
			}
			// at moves the clock to due: nothing runs a second before, and the step named
			// runs at due.
			at := func(due time.Time, step string) {
				t.Helper()
				set(due.Add(-time.Second))
				if n := work(); n != 0 {
					t.Fatalf("%d steps ran a second before %s was due at %s", n, step, due)
				}
				set(due)
				work()
				if s := steps()[step]; s.State != store.StateCompleted && s.State != store.StateSkipped {
					t.Fatalf("%s is %s at its due time %s", step, s.State, due)
				}
			}

			work()
			s := steps()
			if s["lookup"].State != store.StateCompleted || s["recheck"].Reason != store.ReasonDelayed || !s["recheck"].NextAt.Equal(t0.Add(23*time.Hour)) {
				t.Fatalf("after the lookup: lookup %s, recheck %s %s due %s", s["lookup"].State, s["recheck"].State, s["recheck"].Reason, s["recheck"].NextAt)
			}
			if r := s["appointment_reminder"]; r.Reason != store.ReasonDelayed || !r.NextAt.Equal(t0.Add(70*time.Hour)) {
				t.Fatalf("reminder %s %s due %s, want two hours before the appointment", r.State, r.Reason, r.NextAt)
			}
			svc.set(tc.later)
			at(t0.Add(23*time.Hour), "recheck")
			at(t0.Add(24*time.Hour), "follow_up")
			at(t0.Add(70*time.Hour), "appointment_reminder")
			set(t0.Add(30 * 24 * time.Hour))
			work()

			if n := svc.count("Follow up on the lead from yesterday"); n != tc.followUps {
				t.Errorf("%d follow-up tasks, want %d", n, tc.followUps)
			}
			if n := svc.count("Appointment in two hours"); n != 1 {
				t.Errorf("%d reminder tasks, want 1", n)
			}
			want := store.StateCompleted
			if tc.followUps == 0 {
				want = store.StateSkipped
			}
			if s := steps()["follow_up"]; s.State != want {
				t.Errorf("follow_up %s, want %s", s.State, want)
			}
			r, err := st.RunGetByID(ctx, run.ID)
			if err != nil || r.State != store.StateCompleted {
				t.Fatalf("run %+v %v", r, err)
			}
		})
	}
}
