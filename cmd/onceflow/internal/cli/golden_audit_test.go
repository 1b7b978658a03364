package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/cmd/onceflow/internal/auditgolden"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of TestGoldenAudit (testdata/golden/audit) from what the code produces now")

// regenerateGolden is the command that rewrites the golden audit files.
const regenerateGolden = "go test ./cmd/onceflow/internal/cli -run TestGoldenAudit -update"

// TestGoldenAudit tells each scenario of package auditgolden to the engine, on SQLite and
// on PostgreSQL (a fresh file, a fresh schema), and compares what every front-end shows of
// its audit trail — Store.EventList in pages and filtered, onceflow.Explain, GET /v1/audit,
// the console's events tables and `onceflow audit --json` — with the golden files in
// testdata/golden/audit, one per scenario and store. Ids, order and every field are exact;
// times are written as offsets from the scenario's base. The audit trail is a promise to
// operators: a change of storage must leave these files as they are.
func TestGoldenAudit(t *testing.T) {
	t.Parallel()
	for _, sc := range auditgolden.Scenarios() {
		for _, kind := range auditgolden.Kinds {
			t.Run(sc.Name+"/"+kind, func(t *testing.T) {
				t.Parallel()
				d := auditgolden.NewDriver(t, kind)
				sc.Run(d)
				rep := d.Dest.Repeated()
				for _, k := range sc.Twice {
					if rep[k] != 2 {
						t.Errorf("effect %s performed %d times, want twice", k, rep[k])
					}
					delete(rep, k)
				}
				if len(rep) > 0 {
					t.Errorf("effects performed more than once (key: times): %v", rep)
				}
				got, err := auditgolden.Render(d, goldenOutputs(t, d.DB.URL, true))
				if err != nil {
					t.Fatal(err)
				}
				head := fmt.Sprintf("# golden audit: scenario %s (%s), store %s\n# rewrite with: %s\n", sc.Name, sc.About, kind, regenerateGolden)
				path := filepath.Join("testdata", "golden", "audit", sc.Name+"."+kind+".txt")
				auditgolden.Compare(t, path, head+got, *updateGolden, regenerateGolden)
			})
		}
	}
}

// goldenOutputs reads the API checked against the OpenAPI document, and `onceflow audit`
// run in process against db; console says whether the console is read too.
func goldenOutputs(t *testing.T, db string, console bool) auditgolden.Outputs {
	return auditgolden.Outputs{
		WrapAPI: func(h http.Handler) http.Handler {
			return apiChecker.Handler(h, func(err error) { t.Errorf("OpenAPI document: %v", err) })
		},
		Audit: func(args ...string) (string, error) {
			var out, errOut bytes.Buffer
			args = append([]string{"audit", "--db", db}, args...)
			if code := execute(context.Background(), args, &out, &errOut, apiMiddleware); code != 0 {
				return "", fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errOut.String()))
			}
			return out.String(), nil
		},
		Console: console,
	}
}
