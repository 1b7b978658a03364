package store

import (
	"slices"
	"testing"
)

func TestDependencyOrder(t *testing.T) {
	step := func(name string, needs ...string) *Step { return &Step{Name: name, Needs: needs} }
	names := func(steps []*Step) []string {
		var out []string
		for _, st := range steps {
			out = append(out, st.Name)
		}
		return out
	}
	for _, tc := range []struct {
		steps []*Step
		want  []string
	}{
		{[]*Step{step("c", "b"), step("b", "a"), step("a")}, []string{"a", "b", "c"}},
		// Ready together: the given order. A need outside the list is ignored.
		{[]*Step{step("y", "x"), step("a", "elsewhere"), step("x")}, []string{"a", "x", "y"}},
		// A cycle comes last, in the given order.
		{[]*Step{step("p", "q"), step("q", "p"), step("r")}, []string{"r", "p", "q"}},
	} {
		if got := names(DependencyOrder(tc.steps)); !slices.Equal(got, tc.want) {
			t.Errorf("DependencyOrder(%v) = %v, want %v", names(tc.steps), got, tc.want)
		}
	}
}
