package flowfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/egress"
)

// fuzzMaxSource is the largest workflow file FuzzParse tries; real files are a few KB.
const fuzzMaxSource = 16 << 10

// fuzzAllocBudget is what loading one file of n bytes may allocate: a fixed allowance and
// a generous multiple of its size. Reading a file is linear in its size; an input that
// needs more (an alias expanded again and again, a quadratic step) fails the target
// long before it could exhaust a server's memory.
func fuzzAllocBudget(n int) uint64 { return 32<<20 + 4096*uint64(n) }

// FuzzParse loads any workflow file as validate and serve do — parse, check, build and
// derive a run key — and checks that this never panics, that a file with problems reports
// each with a line and column inside the file, and that loading one file stays within a
// memory budget linear in its size.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	for _, p := range seeds {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src, []byte(`{"submission_id": 8812, "email": "ana@example.com"}`))
	}
	for _, s := range []string{
		"name: w\nsteps:\n  - id: a\n    kind: go\n    func: noop\n",
		"name: w\nrun_key: \"{input.id}\"\nentity: \"order:{input.id}\"\ninput:\n  required: [id]\nsteps:\n  - id: a\n    kind: go\n    func: noop\n  - id: b\n    needs: [a]\n    when: \"input.id > 1\"\n    kind: go\n    func: noop\n",
		"name: w\nsteps:\n  - id: a\n    kind: http\n    effect_key: \"k:{input.id}\"\n    http:\n      url: \"https://example.com/{input.id}\"\n      body: {a: \"{input.id}\", b: [1, 2]}\n",
		"name: w\nsteps:\n  - id: a\n    needs: [a]\n    kind: go\n    func: noop\n",
		"name: w\nsteps: [}\n",
		"name: w\nx: &a [1, 2]\nsteps: *a\n",
		"name: w\nretry: {max_attempts: -1, initial: 1h}\nsteps:\n  - {id: a, kind: go, func: noop, timeout: 5x}\n",
		"name: w\nwebhook: {name: h, scheme: stripe, secret_env: [S], event_id: \"{input.id}\"}\nsteps:\n  - {id: a, kind: go, func: noop}\n",
		"\t\x00\xff",
		"",
		"# only a comment\n",
		"---\n...\n",
	} {
		f.Add([]byte(s), []byte(`{"id": 2}`))
	}
	policy := &egress.Policy{}
	noop := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	deps := Deps{HTTPClient: policy.Client(time.Second), Env: func(string) (string, bool) { return "", false },
		Funcs:      map[string]onceflow.StepFunc{"noop": noop},
		Email:      func(*EmailDef) (onceflow.StepFunc, error) { return noop, nil },
		Transition: func(*TransitionDef) (onceflow.StepFunc, error) { return noop, nil },
	}
	f.Fuzz(func(t *testing.T, src, input []byte) {
		if len(src) > fuzzMaxSource {
			return
		}
		budget := fuzzAllocBudget(len(src))
		stop := watchAllocs(budget, func(n uint64) {
			// Parse cannot be interrupted: end the process before the machine runs out of
			// memory, naming the budget, so that the fuzzer keeps the input.
			panic(fmt.Sprintf("loading a %d-byte workflow file allocated %d MB, over its budget of %d MB", len(src), n>>20, budget>>20))
		})
		defer stop()
		d, ps := Parse("w.yaml", src)
		lines := strings.Count(string(src), "\n") + 1
		for _, p := range ps {
			if p.File != "w.yaml" || p.Message == "" || p.Line < 0 || p.Line > lines+1 || p.Col < 0 {
				t.Fatalf("problem %+v outside the file of %d lines", p, lines)
			}
		}
		if d != nil && len(ps) == 0 {
			if _, err := Build([]*Definition{d}, deps); err != nil && !strings.Contains(err.Error(), "w.yaml") {
				t.Fatalf("Build error does not name the file: %v", err)
			}
			_, _ = d.DeriveRunKey(input)
		}
		if n := stop(); n > budget {
			t.Fatalf("loading a %d-byte file allocated %d MB, over the budget of %d MB", len(src), n>>20, budget>>20)
		}
	})
}

// heapAllocs returns the bytes allocated on the heap since the process started.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// watchAllocs calls over, from another goroutine, if the process allocates more than
// budget bytes before stop is called; stop returns the bytes allocated since the start.
func watchAllocs(budget uint64, over func(n uint64)) (stop func() uint64) {
	start := heapAllocs()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if n := heapAllocs() - start; n > budget {
					over(n)
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() uint64 {
		once.Do(func() { close(done); <-finished })
		return heapAllocs() - start
	}
}
