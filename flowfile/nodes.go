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

// checkNodes walks f before it is decoded and returns the first problem the decoder must
// not meet: an alias that takes the count of nodes, with every alias expanded, past
// MaxNodes, or a YAML tag (`!!str`, `!custom`). Workflow files have no use for tags, and
// a tagged scalar where a list belongs crashes the YAML decoder instead of failing.
func checkNodes(file string, f *ast.File) *Problem {
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
			if bad == nil {
				pos := x.GetToken().Position
				bad = &Problem{File: file, Line: pos.Line, Col: pos.Column, Message: fmt.Sprintf(
					"YAML tag %s is not used in workflow files; remove it (quote a value to keep it a string)", x.Start.Value)}
			}
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
