// Package storetest is the conformance suite every onceflow store backend must pass. A
// backend's tests call Exercise with a factory that returns a fresh, empty, migrated store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Exercise(t, func(t *testing.T) store.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"), sqlite.Options{})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks the behaviour the store package documents on the Store interface: the
// states, counts, ledger rows and audit events each method leaves behind. Every method takes
// its clock as a Now parameter, so the suite drives time explicitly and never sleeps.
package storetest

import (
	"testing"

	"github.com/onceflow/onceflow/store"
)

// subtest is one case of the suite; it gets a harness around a fresh store.
type subtest struct {
	name string
	fn   func(h *harness)
}

// Exercise runs the conformance suite. newStore must return a fresh, empty, migrated store
// each time it is called and register its own cleanup (closing the store) on the t it is
// given. Subtests run in parallel, each with its own store.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"Migrate", migrateTests},
		{"Run", runTests},
		{"StepClaim", claimTests},
		{"StepRecord", recordTests},
		{"Effect", effectTests},
		{"Lease", leaseTests},
		{"Event", eventTests},
		{"Leader", leaderTests},
		{"Skip", skipTests},
		{"Entity", entityTests},
		{"Review", reviewTests},
		{"Stats", statsTests},
		{"Retention", retentionTests},
		{"Incident", incidentTests},
		{"Batch", batchTests},
		{"Control", controlTests},
		{"Schedule", scheduleTests},
		{"Delay", delayTests},
		{"WriteBatch", writeBatchTests},
		{"Derived", derivedTests},
		{"Ledger", ledgerTests},
		{"Session", sessionTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(newHarness(t, newStore))
				})
			}
		})
	}
}
