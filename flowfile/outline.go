package flowfile

import "github.com/onceflow/onceflow"

// Outline returns the definitions as workflows whose step functions refuse to run: their
// effect keys, conditions, retry policies, required input and entity are the real ones,
// so a program can check corrections and preview replays — as `onceflow review` does —
// without destinations, secrets or an SMTP server. Never execute steps of a client that
// registered them.
func Outline(defs []*Definition) ([]onceflow.Workflow, error) {
	out := make([]onceflow.Workflow, 0, len(defs))
	for _, d := range defs {
		w, err := d.skeleton()
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}
