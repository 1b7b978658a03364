package sqlite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/store"
)

// TestEventsTakeSequenceIDs reads the package's SQL: every insert into events names the
// ID it drew from the audit sequence, since an insert that let SQLite choose would take an
// ID the sequence may have given to another event.
func TestEventsTakeSequenceIDs(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(eventColumns, "id, ") {
		t.Fatalf("eventColumns %q does not start with the ID", eventColumns)
	}
	insert := regexp.MustCompile("(?i)INSERT\\s+INTO\\s+events\\s*\\(\\s*(`\\s*\\+\\s*eventColumns|\\w+)")
	found := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range insert.FindAllStringSubmatch(string(b), -1) {
			found++
			if m[1] != "id" && !strings.HasSuffix(m[1], "eventColumns") {
				t.Errorf("%s: %q: an insert into events must name the ID it drew (writeTx.event)", f, m[0])
			}
		}
		if strings.Contains(string(b), "INSERT INTO events` +") || regexp.MustCompile(`(?i)INSERT\s+INTO\s+events\s+(VALUES|SELECT)`).Match(b) {
			t.Errorf("%s: an insert into events without its columns", f)
		}
	}
	if found == 0 {
		t.Fatal("found no insert into events: the test reads the wrong files")
	}
}

// TestAuditSequenceAcrossProcesses: two stores on one file, as two processes would open
// it, append events in turns; each sees what the other committed and draws the next IDs,
// so that IDs stay unique and increasing in commit order.
func TestAuditSequenceAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "onceflow.db")
	var stores [2]*Store
	for i := range stores {
		s, err := Open(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 6 {
		s := stores[i%3%2] // 0, 1, 0, 0, 1, 0
		if err := s.EventAppend(t.Context(), &store.Event{At: now, Type: store.EventDataUnmasked, Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.RunInsert(t.Context(), store.RunInsertParams{Workflow: "w", RunKey: string(rune('a' + i)), Input: []byte(`{}`), InputHash: "h",
			Steps: []store.StepInsert{{Name: "a"}}, Actor: "test", Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := stores[1].EventList(t.Context(), store.EventListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 12 {
		t.Fatalf("%d events, want 12", len(evs))
	}
	for i, e := range evs {
		if e.ID != int64(i+1) {
			t.Errorf("event %d (%s) has ID %d, want %d", i, e.Type, e.ID, i+1)
		}
	}
}
