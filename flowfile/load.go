package flowfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Load reads and checks workflow files named by paths: a path is a file, or a directory
// whose *.yaml and *.yml files are read in name order. Like LoadFiles, its error is
// Problems listing everything wrong in every file at once, a path that cannot be read
// included.
func (r *Reader) Load(paths ...string) ([]*Definition, error) {
	var files []string
	var ps Problems
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			ps = append(ps, Problem{File: p, Message: err.Error()})
			continue
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		for _, pat := range []string{"*.yaml", "*.yml"} {
			m, err := filepath.Glob(filepath.Join(p, pat))
			if err != nil {
				return nil, err
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			ps = append(ps, Problem{File: p, Message: "the directory has no .yaml or .yml files"})
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	if len(files) == 0 {
		if len(ps) == 0 {
			return nil, fmt.Errorf("no workflow files given")
		}
		return nil, ps
	}
	defs, err := r.LoadFiles(files...)
	if more, ok := err.(Problems); ok {
		return nil, append(ps, more...)
	}
	if err != nil {
		return nil, err
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return defs, nil
}
