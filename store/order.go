package store

// DependencyOrder returns steps ordered so that every step comes after the steps of the
// list it needs, keeping the given order among steps that are ready together. Needs that
// name no step of the list are ignored; steps in a cycle, which a valid workflow never
// has, come last in the given order.
func DependencyOrder(steps []*Step) []*Step {
	inList := make(map[string]bool, len(steps))
	for _, st := range steps {
		inList[st.Name] = true
	}
	done := make(map[string]bool, len(steps))
	out := make([]*Step, 0, len(steps))
	for len(out) < len(steps) {
		progressed := false
		for _, st := range steps {
			if done[st.Name] {
				continue
			}
			ready := true
			for _, n := range st.Needs {
				if inList[n] && !done[n] {
					ready = false
					break
				}
			}
			if ready {
				done[st.Name] = true
				out = append(out, st)
				progressed = true
			}
		}
		if !progressed {
			for _, st := range steps {
				if !done[st.Name] {
					done[st.Name] = true
					out = append(out, st)
				}
			}
		}
	}
	return out
}
