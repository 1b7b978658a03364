package onceflow_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The module's layout, as the README describes it: internal/ lies beneath the library;
// the command-line dependencies stay in cmd/; the front-ends read through the client, not
// the store or the workflow files; no package hands state to another through init() or
// a package-level function variable; tests set hooks on an instance (its config or hooks
// struct), not on a package variable; every package says what it is for.
//
// Each rule starts with a list of the packages that break it today. A package leaves the
// list in the change that mends it, and the test fails while a listed package no longer
// breaks the rule, so that the lists only shrink.

const module = "github.com/onceflow/onceflow"

// layoutExceptions are today's offenders, by rule.
var layoutExceptions = map[string][]string{
	// The backends' switches for their own tests: a connection wrapper (sqlite), the check
	// of derived events (sqlite) and a query tracer (postgres).
	"test hook": {"store/postgres", "store/sqlite"},
}

// goPackage is one directory's non-test Go files.
type goPackage struct {
	dir     string // relative to the module root, "." for the root
	name    string
	imports map[string][]string // import path → files
	files   []*ast.File
	names   []string
}

func modulePackages(t *testing.T) []*goPackage {
	t.Helper()
	byDir := map[string]*goPackage{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != "." && (strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "." {
				return filepath.SkipDir // another module (bench/peers)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		p := byDir[dir]
		if p == nil {
			p = &goPackage{dir: dir, name: f.Name.Name, imports: map[string][]string{}}
			byDir[dir] = p
		}
		p.files = append(p.files, f)
		p.names = append(p.names, filepath.Base(path))
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			p.imports[ip] = append(p.imports[ip], filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*goPackage
	for _, p := range byDir {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	if len(out) < 20 {
		t.Fatalf("found %d packages: run the test from the module root", len(out))
	}
	return out
}

func TestLayout(t *testing.T) {
	pkgs := modulePackages(t)
	broken := map[string]map[string]string{} // rule → package → why
	breaks := func(rule, dir, why string) {
		if broken[rule] == nil {
			broken[rule] = map[string]string{}
		}
		if _, ok := broken[rule][dir]; !ok {
			broken[rule][dir] = why
		}
	}
	for _, p := range pkgs {
		for ip, files := range p.imports {
			switch {
			case ip == module && strings.HasPrefix(p.dir, "internal/"):
				breaks("internal imports root", p.dir, "imports the root package in "+strings.Join(files, ", "))
			case ip == "github.com/spf13/cobra" && !strings.HasPrefix(p.dir, "cmd/"):
				breaks("cobra outside cmd", p.dir, "imports cobra in "+strings.Join(files, ", "))
			case (ip == module+"/store" || ip == module+"/flowfile") && (p.dir == "onceflowhttp" || p.dir == "onceflowui"):
				breaks("front-end imports store or flowfile", p.dir, "imports "+ip+" in "+strings.Join(files, ", "))
			case (p.dir == "flowfile" || p.dir == "flowfile/block" || p.dir == "steps") && isKindPackage(ip):
				breaks("reader names a kind", p.dir, "imports the kind package "+ip+" in "+strings.Join(files, ", ")+": the reader of files knows step and trigger kinds only through their registries")
			}
		}
		docs := 0
		for i, f := range p.files {
			prefix := "Package " + p.name + " "
			if p.name == "main" {
				prefix = "Command "
			}
			if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), prefix) {
				docs++
			}
			if p.name == "main" {
				continue
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil && d.Name.Name == "init" {
						breaks("init", p.dir, "has func init in "+p.names[i])
					}
				case *ast.GenDecl:
					if d.Tok != token.VAR {
						continue
					}
					for _, spec := range d.Specs {
						vs := spec.(*ast.ValueSpec)
						_, funcType := vs.Type.(*ast.FuncType)
						for j, n := range vs.Names {
							funcValue := false
							if j < len(vs.Values) {
								_, funcValue = vs.Values[j].(*ast.FuncLit)
							}
							if n.IsExported() && (funcType || funcValue) {
								breaks("exported func variable", p.dir, "exports the function variable "+n.Name+" in "+p.names[i])
							}
						}
					}
				}
			}
		}
		for name, file := range testAssigned(t, p) {
			breaks("test hook", p.dir, "its test "+file+" sets the package variable "+name+": make it a field of the instance the test builds")
		}
		if docs != 1 {
			breaks("package doc", p.dir, "has "+strconv.Itoa(docs)+` package doc comments ("Package `+p.name+` …", or "Command …" for a command); a package has one`)
		}
	}
	rules := []string{"internal imports root", "cobra outside cmd", "front-end imports store or flowfile", "reader names a kind", "init", "exported func variable", "test hook", "package doc"}
	for _, rule := range rules {
		allowed := layoutExceptions[rule]
		var dirs []string
		for dir := range broken[rule] {
			dirs = append(dirs, dir)
		}
		sort.Strings(dirs)
		for _, dir := range dirs {
			if !slices.Contains(allowed, dir) {
				t.Errorf("%s: %s (rule %q)", dir, broken[rule][dir], rule)
			}
		}
		for _, dir := range allowed {
			if _, ok := broken[rule][dir]; !ok {
				t.Errorf("%s keeps the rule %q now: delete it from layoutExceptions", dir, rule)
			}
		}
	}
}

// isKindPackage reports whether an import path is a step kind's or a trigger kind's
// package (or the standard set of them): the reader of workflow files knows only the
// contracts, steps and triggers.
func isKindPackage(ip string) bool {
	rest, ok := strings.CutPrefix(ip, module+"/")
	if !ok {
		return false
	}
	if strings.HasPrefix(rest, "steps/") || strings.HasPrefix(rest, "triggers/") {
		return true
	}
	name, ok := strings.CutPrefix(rest, "internal/")
	return ok && strings.HasSuffix(name, "step") && !strings.Contains(name, "/")
}

// testAssigned returns the package-level variables of p that its own test files (package
// p, not p_test) assign or Store into, each with the first file that does.
func testAssigned(t *testing.T, p *goPackage) map[string]string {
	t.Helper()
	vars := map[string]bool{}
	for _, f := range p.files {
		for _, decl := range f.Decls {
			if d, ok := decl.(*ast.GenDecl); ok && d.Tok == token.VAR {
				for _, spec := range d.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						vars[n.Name] = n.Name != "_"
					}
				}
			}
		}
	}
	names, err := filepath.Glob(filepath.Join(p.dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != p.name {
			continue
		}
		// A package-level variable of another file is an identifier the parser leaves
		// unresolved (Obj nil); a local of the same name is resolved.
		hit := func(e ast.Expr) {
			if id, ok := e.(*ast.Ident); ok && id.Obj == nil && vars[id.Name] {
				if _, seen := out[id.Name]; !seen {
					out[id.Name] = filepath.Base(name)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				if x.Tok == token.ASSIGN {
					for _, l := range x.Lhs {
						hit(l)
					}
				}
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Store" || sel.Sel.Name == "Swap") {
					hit(sel.X)
				}
			}
			return true
		})
	}
	return out
}
