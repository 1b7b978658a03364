package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_second.sql": {Data: []byte("SELECT 2;")},
		"m/0001_first.sql":  {Data: []byte("SELECT 1;")},
	}
	ms, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 1 || ms[0].Name != "first" || ms[1].SQL != "SELECT 2;" {
		t.Fatalf("%+v", ms)
	}
	for name, files := range map[string]fstest.MapFS{
		"gap":      {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"bad name": {"m/first.sql": {}},
		"not sql":  {"m/0001_a.txt": {}},
	} {
		if _, err := Load(files, "m"); err == nil {
			t.Errorf("%s: loaded", name)
		} else if !strings.Contains(err.Error(), "migration") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
