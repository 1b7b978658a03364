package sqlstep_test

import (
	"context"
	"testing"

	"github.com/onceflow/onceflow/steps/sqlstep"
	"github.com/onceflow/onceflow/steps/steptest"
)

// The business database is a real PostgreSQL schema or MariaDB database of the test's own;
// a statement whose guard no longer matches (the order was cancelled) makes the attempt
// permanent. Its database cannot be made to fail one attempt on demand, nor to leave an
// outcome unknown without killing the process between COMMIT and record (which
// TestKilledAfterCommitAppliesOnce does).
func TestConformance(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			steptest.Exercise(t, func(t *testing.T) steptest.Harness {
				s := newShop(t, dialect)
				_, db := s.step(t, s.markPaid(false))
				if err := db.Migrate(context.Background()); err != nil {
					t.Fatal(err)
				}
				return steptest.Harness{
					Kind: sqlstep.NewKind(sqlstep.KindOptions{}),
					Block: "database: SHOP_DB\non_mismatch: needs_review\nstatements:\n" +
						"  - query: \"UPDATE orders SET paid_count = paid_count + 1 WHERE id = " + s.p(1) + " AND status = 'pending'\"\n" +
						"    args: [\"1001\"]\n    expect_rows: 1\n",
					Env: map[string]string{"SHOP_DB": s.dsn},
					Arrange: func(t *testing.T, o steptest.Outcome) bool {
						switch o {
						case steptest.Permanent:
							if _, err := s.db.Exec("UPDATE orders SET status = 'cancelled' WHERE id = 1001"); err != nil {
								t.Fatal(err)
							}
						case steptest.Retryable, steptest.Unknown:
							return false
						}
						return true
					},
					Identities: func(t *testing.T) []string {
						rows, err := s.db.Query("SELECT effect_key FROM " + sqlstep.Table)
						if err != nil {
							t.Fatal(err)
						}
						defer rows.Close()
						var keys []string
						for rows.Next() {
							var k string
							if err := rows.Scan(&k); err != nil {
								t.Fatal(err)
							}
							keys = append(keys, k)
						}
						return keys
					},
					Broken: "database: SHOP_DB\nstatements:\n  - query: \"DROP TABLE orders\"\n",
				}
			})
		})
	}
}
