package apiv1

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/onceflow/onceflow"
)

func TestBulkJSON(t *testing.T) {
	it := &onceflow.BulkItem{RunID: 7, Step: "charge", Reason: "outcome_unknown", OK: true, RunState: onceflow.State("running"),
		Err: errors.New("not shown: the caller masks it")}
	b := Bulk[Plan]{Action: "retry", Matched: 1, OK: 1, Items: []BulkItem[Plan]{NewBulkItem[Plan](it)}}
	got, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"action":"retry","dry_run":false,"matched":1,"ok":1,"refused":0,"items":[` +
		`{"run_id":7,"step":"charge","reason":"outcome_unknown","ok":true,"run_state":"running"}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
