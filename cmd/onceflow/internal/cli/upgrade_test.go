package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/cmd/onceflow/internal/auditgolden"
)

var (
	updateUpgrade = flag.Bool("update-upgrade", false, "rewrite the audit TestUpgradeInPlace expects (testdata/upgrade/v1.*.before.txt, v1.*.after.txt) from the committed fixture")
	updateFixture = flag.Bool("update-fixture", false, "rebuild the upgrade fixture (testdata/upgrade/v1.*.sql) with the current code and rewrite what TestUpgradeInPlace expects: only on the commit whose schema the fixture stands for")
)

const (
	regenerateUpgrade = "go test ./cmd/onceflow/internal/cli -run TestUpgradeInPlace -update-upgrade"
	regenerateFixture = "go test ./cmd/onceflow/internal/cli -run TestUpgradeInPlace -update-fixture"
)

// TestUpgradeInPlace loads the upgrade fixture — a database dumped with the schema of the
// release before the persistence redesign (testdata/upgrade/v1.<store>.sql), holding runs
// in every state (auditgolden.BuildEveryState) — into a fresh SQLite file and a fresh
// PostgreSQL schema, opens it with the current code (which migrates it), and checks that
// the audit trail reads as it did before the migration (v1.<store>.before.txt), that the
// engine then finishes every run with no effect performed twice across the two releases,
// and that the trail it leaves is the one the old release left (v1.<store>.after.txt).
func TestUpgradeInPlace(t *testing.T) {
	t.Parallel()
	for _, kind := range auditgolden.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := filepath.Join("testdata", "upgrade")
			dumpPath := filepath.Join(dir, "v1."+kind+".sql")
			performedPath := filepath.Join(dir, "v1."+kind+".performed")
			if *updateFixture {
				writeFixture(t, kind, dumpPath, performedPath)
			}
			dump, err := os.ReadFile(dumpPath)
			if err != nil {
				t.Fatalf("read the fixture: %v (build it with %s)", err, regenerateFixture)
			}
			performedText, err := os.ReadFile(performedPath)
			if err != nil {
				t.Fatal(err)
			}
			performed := strings.Fields(string(performedText))

			db := auditgolden.NewDB(t, kind)
			if err := auditgolden.Load(ctx, db, string(dump)); err != nil {
				t.Fatal(err)
			}
			clock := auditgolden.NewClock()
			clock.Advance(auditgolden.EveryStateAt.Sub(auditgolden.Base))
			dest := auditgolden.NewDest()
			dest.Restore(performed)
			d := auditgolden.Attach(t, db, clock, dest) // migrates
			type versioned interface {
				SchemaVersion(context.Context) (int, int, error)
			}
			if applied, known, err := d.Store.(versioned).SchemaVersion(ctx); err != nil || applied != known {
				t.Fatalf("after opening the fixture: schema version %d of %d (%v), want every migration applied", applied, known, err)
			}
			auditgolden.RegisterEveryState(d)
			update := *updateUpgrade || *updateFixture
			regen := regenerateUpgrade + " (the fixture itself: " + regenerateFixture + ", on the old release only)"

			before, err := auditgolden.Render(d, goldenOutputs(t, db.URL, false))
			if err != nil {
				t.Fatal(err)
			}
			head := fmt.Sprintf("# upgrade fixture v1, store %s: the audit trail right after the current code opened (migrated) it\n", kind)
			auditgolden.Compare(t, filepath.Join(dir, "v1."+kind+".before.txt"), head+before, update, regen)

			auditgolden.FinishEveryState(d)
			if rep := dest.Repeated(); len(rep) > 0 {
				t.Errorf("effects performed more than once across the upgrade (key: times): %v", rep)
			}
			after, err := auditgolden.Render(d, goldenOutputs(t, db.URL, true))
			if err != nil {
				t.Fatal(err)
			}
			head = fmt.Sprintf("# upgrade fixture v1, store %s: the audit trail once the engine finished every run\n# effects performed, before and after: %s\n",
				kind, strings.Join(dest.Performed(), " "))
			auditgolden.Compare(t, filepath.Join(dir, "v1."+kind+".after.txt"), head+after, update, regen)
		})
	}
}

// writeFixture tells the first half of the every-state story on a fresh database with the
// current code and dumps it.
func writeFixture(t *testing.T, kind, dumpPath, performedPath string) {
	t.Helper()
	d := auditgolden.NewDriver(t, kind)
	auditgolden.BuildEveryState(d)
	// The commit that last changed the store: its schema and the rows it writes.
	commit := "unknown"
	if out, err := exec.Command("git", "log", "-1", "--format=%H", "--", "../../../../store").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
	}
	dump, err := auditgolden.Dump(context.Background(), d.DB, []string{
		"onceflow upgrade fixture v1 (" + kind + "): the schema and rows of a database in which auditgolden.BuildEveryState",
		"left runs in every state, written by the store as of commit " + commit + ".",
		"TestUpgradeInPlace loads it into an empty database and lets the current code migrate and finish it.",
		"Rebuilt only by " + regenerateFixture + ",",
		"on a commit whose migrations are the ones below; never edit it by hand.",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dumpPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dumpPath, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(performedPath, []byte(strings.Join(d.Dest.Performed(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Store.Close()
}
