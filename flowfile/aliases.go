package flowfile

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
)

// MaxNodes bounds how many YAML nodes a workflow file may stand for once its aliases are
// expanded. A file of a few hundred bytes whose aliases refer to anchors that hold aliases
// ("billion laughs") would otherwise expand to more values than memory holds; real
// workflow files stay far below it.
const MaxNodes = 100_000

// checkAliases counts the nodes of f with every alias expanded and returns a problem at
// the alias that takes the count past MaxNodes.
func checkAliases(file string, f *ast.File) *Problem {
	anchors := map[string]int{}
	var bad *Problem
	var size func(n ast.Node) int
	size = func(n ast.Node) int {
		if n == nil || bad != nil {
			return 0
		}
		total := 1
		add := func(k int) {
			total += k
			if total > MaxNodes {
				total = MaxNodes + 1
			}
		}
		switch x := n.(type) {
		case *ast.DocumentNode:
			add(size(x.Body))
		case *ast.MappingNode:
			for _, v := range x.Values {
				add(size(v))
			}
		case *ast.MappingValueNode:
			add(size(x.Key))
			add(size(x.Value))
		case *ast.MappingKeyNode:
			add(size(x.Value))
		case *ast.SequenceNode:
			for _, v := range x.Values {
				add(size(v))
			}
		case *ast.TagNode:
			add(size(x.Value))
		case *ast.AnchorNode:
			k := size(x.Value)
			if x.Name != nil {
				anchors[x.Name.String()] = k
			}
			add(k)
		case *ast.AliasNode:
			if x.Value != nil {
				add(anchors[x.Value.String()])
			}
			if total > MaxNodes && bad == nil {
				pos := x.GetToken().Position
				bad = &Problem{File: file, Line: pos.Line, Col: pos.Column, Message: fmt.Sprintf(
					"aliases expand this file to more than %d values; a workflow file needs far fewer (remove the nested aliases)", MaxNodes)}
			}
		}
		return total
	}
	for _, d := range f.Docs {
		if n := size(d); bad == nil && n > MaxNodes {
			bad = &Problem{File: file, Message: fmt.Sprintf(
				"aliases expand this file to more than %d values; a workflow file needs far fewer (remove the nested aliases)", MaxNodes)}
		}
		if bad != nil {
			return bad
		}
	}
	return nil
}
