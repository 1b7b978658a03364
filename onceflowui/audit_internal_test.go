package onceflowui

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store/sqlite"
)

// An export's cells never start a spreadsheet formula: a note typed as =HYPERLINK(…) is
// text in the CSV.
func TestExportCellIsNoFormula(t *testing.T) {
	for in, want := range map[string]string{
		`=HYPERLINK("https://evil.example","x")`: `'=HYPERLINK("https://evil.example","x")`,
		"+1 555":                                 "'+1 555", "-2": "'-2", "@SUM(A1)": "'@SUM(A1)", "\tx": "'\tx",
		"run cancelled by token:ops": "run cancelled by token:ops", "": "",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}

// An export stops at its bound and says so in its last record, as CSV and as JSON; below
// the bound it is complete.
func TestExportStopsAtItsBound(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "onceflow.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := client.RecordOperatorEvent(ctx, onceflow.OperatorEvent{Type: onceflow.EventConsoleSignedIn, Actor: fmt.Sprintf("user:%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	export := func(format string) string {
		t.Helper()
		w := httptest.NewRecorder()
		if err := c.auditExport(format)(w, httptest.NewRequest(http.MethodGet, "/ui/audit/export."+format, nil)); err != nil {
			t.Fatal(err)
		}
		return w.Body.String()
	}
	c.cfg.MaxExport = 3
	records, err := csv.NewReader(strings.NewReader(export("csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 5 || records[1][9] != "user:4" || records[3][9] != "user:2" || records[4][2] != "export.incomplete" ||
		!strings.Contains(records[4][11], "stops at the newest 3 events") {
		t.Fatalf("a CSV export bounded at 3 of 5 events: %q", records)
	}
	var doc struct {
		Events   []json.RawMessage `json:"events"`
		Complete bool              `json:"complete"`
		Note     string            `json:"note"`
	}
	if err := json.Unmarshal([]byte(export("json")), &doc); err != nil || len(doc.Events) != 3 || doc.Complete || !strings.Contains(doc.Note, "stops at") {
		t.Fatalf("a JSON export bounded at 3 of 5 events: %+v (%v)", doc, err)
	}
	c.cfg.MaxExport = 5
	if err := json.Unmarshal([]byte(export("json")), &doc); err != nil || len(doc.Events) != 5 || !doc.Complete {
		t.Fatalf("a JSON export of 5 events bounded at 5: %+v (%v)", doc, err)
	}
}
