package cli

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// audit says on standard error when --limit cut its answer short, with the --after that
// continues; the pages together are the whole trail. An answer the limit did not cut says
// nothing.
func TestAuditSaysWhenItStoppedAtTheLimit(t *testing.T) {
	f := setup(t)
	id := strconv.FormatInt(f.runID, 10)
	type event struct {
		ID int64 `json:"id"`
	}
	list := func(args ...string) ([]event, string) {
		t.Helper()
		r := runOK(t, append([]string{"audit", "--db", f.db, "--run", id, "--json"}, args...)...)
		var evs []event
		if err := json.Unmarshal([]byte(r.stdout), &evs); err != nil {
			t.Fatalf("audit %v: %v\n%s", args, err, r.stdout)
		}
		return evs, r.stderr
	}
	all, stderr := list()
	if len(all) < 4 || stderr != "" {
		t.Fatalf("the whole trail: %d events, stderr %q", len(all), stderr)
	}
	if _, stderr := list("--limit", strconv.Itoa(len(all))); stderr != "" {
		t.Errorf("a limit the trail fits says %q", stderr)
	}
	first, stderr := list("--limit", "2")
	m := regexp.MustCompile(`^audit: stopped at its row limit, --limit 2; more events match: raise --limit, or continue with --after ([0-9]+)\n$`).FindStringSubmatch(stderr)
	if len(first) != 2 || m == nil || m[1] != strconv.FormatInt(first[1].ID, 10) {
		t.Fatalf("--limit 2: %d events, stderr %q", len(first), stderr)
	}
	rest, stderr := list("--after", m[1])
	if stderr != "" || len(first)+len(rest) != len(all) || rest[0].ID != all[2].ID {
		t.Fatalf("continued with --after %s: %d events (want %d), stderr %q", m[1], len(rest), len(all)-2, stderr)
	}
	// The table says it too.
	r := runOK(t, "audit", "--db", f.db, "--run", id, "--limit", "1")
	if !strings.HasPrefix(r.stderr, "audit: stopped at its row limit, --limit 1;") {
		t.Errorf("the table's stderr %q", r.stderr)
	}
}
