package onceflowhttp

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/onceflow/onceflow/store"
)

// POST /v1/runs/{id}/cancel cancels a run as the token's owner, with the note; only an
// admin token may, and a run with nothing left to cancel is a 409.
func TestCancelRunAPI(t *testing.T) {
	b := setup(t)
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, `{"submission_id": "s1"}`), http.StatusCreated, "")
	id := b.runs()[0].ID
	path := "/v1/runs/" + strconv.FormatInt(id, 10) + "/cancel"

	wantStatus(t, b.do("POST", path, ingestToken, nil, `{"note": "spam"}`), http.StatusForbidden, "forbidden")
	wantStatus(t, b.do("POST", path, adminToken, nil, `{"nope": 1}`), http.StatusBadRequest, "malformed-json")
	a := b.do("POST", path, adminToken, nil, `{"note": "spam submission"}`)
	wantStatus(t, a, http.StatusOK, "")
	if a.json["run_state"] != "cancelled" || a.json["actor"] != "token:ops" || len(a.json["cancelled"].([]any)) != 1 || len(a.json["running"].([]any)) != 0 {
		t.Errorf("cancel answer %s", a.body)
	}
	evs, err := b.store.EventList(context.Background(), store.EventListParams{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || e.Type == store.EventRunCancelled && e.Actor == "token:ops"
	}
	if !found {
		t.Errorf("no run.cancelled event by token:ops")
	}
	wantStatus(t, b.do("POST", path, adminToken, nil, ""), http.StatusConflict, "run-finished")
	wantStatus(t, b.do("POST", "/v1/runs/999/cancel", adminToken, nil, ""), http.StatusNotFound, "run-not-found")
	wantStatus(t, b.do("POST", "/v1/runs/x/cancel", adminToken, nil, ""), http.StatusBadRequest, "invalid-id")
}

// Pause and resume through the API: durable, listed, audited; starts are still accepted
// while a workflow is paused, and its steps run only after the resume.
func TestPauseResumeAPI(t *testing.T) {
	b := setup(t)
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/pause", ingestToken, nil, ""), http.StatusForbidden, "forbidden")
	a := b.do("POST", "/v1/workflows/website-lead/pause", adminToken, nil, `{"note": "CRM maintenance"}`)
	wantStatus(t, a, http.StatusOK, "")
	if a.json["paused"] != true || a.json["changed"] != true {
		t.Errorf("pause answer %s", a.body)
	}
	if a := b.do("POST", "/v1/workflows/website-lead/pause", adminToken, nil, ""); a.json["changed"] != nil {
		t.Errorf("second pause answer %s", a.body)
	}
	a = b.do("GET", "/v1/pauses", adminToken, nil, "")
	wantStatus(t, a, http.StatusOK, "")
	list := a.json["paused"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["workflow"] != "website-lead" || list[0].(map[string]any)["note"] != "CRM maintenance" ||
		list[0].(map[string]any)["actor"] != "token:ops" {
		t.Errorf("pauses %s", a.body)
	}
	wantStatus(t, b.do("POST", "/v1/workflows/website-lead/runs", ingestToken, nil, `{"submission_id": "s1"}`), http.StatusCreated, "")
	if n, err := b.client.Work(context.Background()); err != nil || n != 0 {
		t.Fatalf("a paused workflow's step ran: %d, %v", n, err)
	}
	a = b.do("POST", "/v1/workflows/website-lead/resume", adminToken, nil, `{"note": "back"}`)
	wantStatus(t, a, http.StatusOK, "")
	if a.json["paused"] != false || a.json["changed"] != true {
		t.Errorf("resume answer %s", a.body)
	}
	if n, err := b.client.Work(context.Background()); err != nil || n != 1 {
		t.Fatalf("after the resume: %d, %v", n, err)
	}
	wantStatus(t, b.do("POST", "/v1/workflows/bad%20name/pause", adminToken, nil, ""), http.StatusBadRequest, "invalid-workflow-name")
}

// A name that is not registered, has no runs and is not paused is a 404 for pause and
// resume alike, as in the console, and nothing is paused.
func TestPauseUnknownWorkflowAPI(t *testing.T) {
	b := setup(t)
	for _, action := range []string{"pause", "resume"} {
		a := b.do("POST", "/v1/workflows/does-not-exist/"+action, adminToken, nil, `{"note": "typo"}`)
		wantStatus(t, a, http.StatusNotFound, "workflow-not-found")
		if a.json["detail"] != `no workflow "does-not-exist" is registered, has runs or is paused; nothing was changed` {
			t.Errorf("%s: %s", action, a.body)
		}
	}
	a := b.do("GET", "/v1/pauses", adminToken, nil, "")
	if list := a.json["paused"].([]any); len(list) != 0 {
		t.Fatalf("paused after refused pauses: %s", a.body)
	}
}
