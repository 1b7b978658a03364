package flowfile

import (
	"bytes"
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
)

// fuzzMaxSource is the largest workflow file FuzzParse tries; real files are a few KB.
const fuzzMaxSource = 16 << 10

// fuzzAllocBudget is what loading the file src may allocate: a fixed allowance and a
// generous multiple of its size — reading a file is linear in its size — plus, for a file
// with aliases, 1 KiB for each value MaxNodes lets its aliases expand to: 257 values
// aliased 258 times are 66,306 values within the bound, which the step kinds then check
// one by one (about 50 MB). An input that needs more (an alias expanded past the bound, a
// quadratic step) fails the target long before it could exhaust a server's memory.
func fuzzAllocBudget(src []byte) uint64 {
	b := 32<<20 + 4096*uint64(len(src))
	if bytes.Contains(src, []byte("*")) {
		b += 1 << 10 * MaxNodes
	}
	return b
}

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
	noop := func(context.Context, *onceflow.StepContext) (any, error) { return nil, nil }
	reader := withFuncs(f, map[string]onceflow.StepFunc{"noop": noop})
	builder := NewBuilder(BuildOptions{})
	f.Fuzz(func(t *testing.T, src, input []byte) {
		if len(src) > fuzzMaxSource {
			return
		}
		budget := fuzzAllocBudget(src)
		stop := watchAllocs(budget, func(n uint64) {
			// Parse cannot be interrupted: end the process before the machine runs out of
			// memory, naming the budget, so that the fuzzer keeps the input.
			panic(fmt.Sprintf("loading a %d-byte workflow file allocated %d MB, over its budget of %d MB", len(src), n>>20, budget>>20))
		})
		defer stop()
		d, ps := reader.Parse("w.yaml", src)
		lines := strings.Count(string(src), "\n") + 1
		for _, p := range ps {
			if p.File != "w.yaml" || p.Message == "" || p.Line < 0 || p.Line > lines+1 || p.Col < 0 {
				t.Fatalf("problem %+v outside the file of %d lines", p, lines)
			}
		}
		if d != nil && len(ps) == 0 {
			if _, err := builder.Workflows([]*Definition{d}); err != nil && !strings.Contains(err.Error(), "w.yaml") {
				t.Fatalf("Build error does not name the file: %v", err)
			}
			_, _ = d.DeriveRunKey(input)
		}
		if n := stop(); n > budget {
			t.Fatalf("loading a %d-byte file allocated %d MB, over the budget of %d MB", len(src), n>>20, budget>>20)
		}
	})
}

// nestingDoc builds a workflow file from prog, a little program of one byte per
// operation: lists and mappings opened in flow ([, {) and block (- , key:) style, closed,
// scalars (some with brackets inside quotes), anchors and aliases, and a repeat that
// turns a short program into thousands of levels. The file is valid YAML often, and
// deeply nested or alias-heavy often; a few bytes of input reach depths that took the
// parser gigabytes.
func nestingDoc(prog []byte) []byte {
	var b strings.Builder
	b.WriteString("name: nest\nsteps:\n  - id: a\n    kind: http\n    effect_key: \"k:{input.id}\"\n    http:\n      url: \"https://example.com\"\n      body: ")
	var flow []byte // the closing brackets of the open flow collections
	block := 0      // block levels opened since the last flow collection closed them all
	items := 0
	var ops []byte
	for _, c := range prog {
		if c%10 == 8 { // the previous operation again, 2^n times
			if n := len(ops); n > 0 {
				for range 1 << (c / 10 % 14) {
					ops = append(ops, ops[n-1])
				}
			}
			continue
		}
		ops = append(ops, c)
	}
	anchored := false // an anchor was written: the value it names follows
	sep := func() {
		if anchored {
			anchored = false
			return
		}
		if len(flow) > 0 && items > 0 {
			b.WriteString(", ")
		}
		if len(flow) > 0 && flow[len(flow)-1] == '}' {
			fmt.Fprintf(&b, "k%d: ", items)
		}
		items++
	}
	for _, c := range ops {
		if b.Len() > MaxFileSize {
			break
		}
		arg := int(c / 10)
		switch c % 10 {
		case 0:
			sep()
			b.WriteString("[")
			flow, items = append(flow, ']'), 0
		case 1:
			sep()
			b.WriteString("{")
			flow, items = append(flow, '}'), 0
		case 2:
			if n := len(flow); n > 0 {
				b.WriteByte(flow[n-1])
				flow, items = flow[:n-1], 1
			} else if block > 0 {
				block--
			}
		case 3:
			sep()
			b.WriteString([]string{"x", `"[{"`, "'}]'", "7", "null", "|\n" + strings.Repeat(" ", 10+2*block) + "text"}[arg%6])
		case 4:
			sep()
			fmt.Fprintf(&b, "&a%d ", arg%4)
			anchored = true
		case 5:
			sep()
			fmt.Fprintf(&b, "*a%d", arg%4)
		case 6, 7:
			if len(flow) > 0 {
				sep()
				b.WriteString("x")
				continue
			}
			block++
			if c%10 == 6 && arg%2 == 1 {
				b.WriteString("- ") // "- - x": a list in a list on one line
				continue
			}
			b.WriteString("\n" + strings.Repeat(" ", 6+2*block))
			if c%10 == 6 {
				b.WriteString("- ")
			} else {
				fmt.Fprintf(&b, "k%d: ", arg)
			}
		case 9:
			if len(flow) == 0 {
				b.WriteString(" # note")
			}
		}
	}
	for i := len(flow) - 1; i >= 0; i-- {
		b.WriteByte(flow[i])
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// FuzzNesting loads the files nestingDoc builds: deeply nested and aliased documents.
// Loading one never panics, ends with a definition or with problems inside the file, and
// stays within the memory budget of FuzzParse.
func FuzzNesting(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 138, 3},                          // [[[…x]]] 8,193 deep
		{1, 58, 3},                           // {k0: {k0: …}} 33 deep
		{16, 128, 3},                         // - - - … 4,097 deep in block style, on one line
		{7, 68, 3},                           // k: k: … 65 deep by indentation
		{0, 4, 0, 3, 3, 2, 0, 5, 5, 5, 2, 2}, // an anchor and its aliases
		{0, 4, 0, 3, 38, 2, 14, 0, 5, 38, 2, 24, 0, 15, 38, 2, 2}, // aliases of aliases
		{6, 7, 0, 13, 23, 2, 7, 33, 9},
		{0, 1, 0, 1, 48, 53},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 256 {
			return
		}
		src := nestingDoc(prog)
		budget := fuzzAllocBudget(src)
		stop := watchAllocs(budget, func(n uint64) {
			panic(fmt.Sprintf("loading a %d-byte nested workflow file allocated %d MB, over its budget of %d MB", len(src), n>>20, budget>>20))
		})
		defer stop()
		d, ps := testReader.Parse("w.yaml", src)
		lines := strings.Count(string(src), "\n") + 1
		for _, p := range ps {
			if p.File != "w.yaml" || p.Message == "" || p.Line < 0 || p.Line > lines+1 || p.Col < 0 {
				t.Fatalf("problem %+v outside the file of %d lines", p, lines)
			}
		}
		if d == nil && len(ps) == 0 {
			t.Fatal("Parse returned neither a definition nor a problem")
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
