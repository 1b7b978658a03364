package sqlite_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow/store"
	"github.com/onceflow/onceflow/store/sqlite"
)

func TestRunInsertManyNilInput(t *testing.T) {
	t.Parallel()
	s := openStore(t, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	res, err := s.RunInsertMany(t.Context(), []store.RunInsertParams{
		{Workflow: "orders", RunKey: "none", Now: base, Steps: []store.StepInsert{{Name: "a"}}},
		{Workflow: "orders", RunKey: "some", Input: json.RawMessage(`null`), Now: base, Steps: []store.StepInsert{{Name: "a"}}},
	})
	if err != nil {
		t.Fatalf("RunInsertMany: %v", err)
	}
	if res[0].Err == nil || res[0].Run != nil {
		t.Errorf("a nil input: %+v, want its own error", res[0])
	}
	if res[1].Err != nil || !res[1].Created {
		t.Errorf("the other param: %+v, want created", res[1])
	}
}
