package onceflowui

import "github.com/onceflow/onceflow"

// graph is a run's steps laid out for drawing: one column per depth (a step sits one
// column right of the deepest step it needs), edges from each need to its step.
type graph struct {
	Width, Height int
	Nodes         []node
	Edges         []edge
}

type node struct {
	Name  string
	State onceflow.State
	X, Y  int
	W, H  int
	// TX, TY place the labels.
	TX, TY, SY int
}

type edge struct {
	X1, Y1, X2, Y2 int
}

// Sizes of the drawing, in SVG user units.
const (
	nodeW   = 170
	nodeH   = 46
	colGap  = 60
	rowGap  = 18
	padding = 10
)

// layout places ordered (in dependency order) in columns by depth.
func layout(ordered []*onceflow.StepInfo) graph {
	depth := map[string]int{}
	rows := map[int]int{}
	pos := map[string]*node{}
	var g graph
	for _, st := range ordered {
		d := 0
		for _, n := range st.Needs {
			if dn, ok := depth[n]; ok && dn+1 > d {
				d = dn + 1
			}
		}
		depth[st.Name] = d
		row := rows[d]
		rows[d]++
		x := padding + d*(nodeW+colGap)
		y := padding + row*(nodeH+rowGap)
		g.Nodes = append(g.Nodes, node{Name: st.Name, State: st.State, X: x, Y: y, W: nodeW, H: nodeH, TX: x + 10, TY: y + 19, SY: y + 36})
		g.Width = max(g.Width, x+nodeW+padding)
		g.Height = max(g.Height, y+nodeH+padding)
	}
	for i := range g.Nodes {
		pos[g.Nodes[i].Name] = &g.Nodes[i]
	}
	for _, st := range ordered {
		to := pos[st.Name]
		for _, n := range st.Needs {
			if from, ok := pos[n]; ok {
				g.Edges = append(g.Edges, edge{X1: from.X + from.W, Y1: from.Y + from.H/2, X2: to.X, Y2: to.Y + to.H/2})
			}
		}
	}
	return g
}
