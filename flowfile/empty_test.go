package flowfile

import (
	"strings"
	"testing"
)

// An empty file, or one holding only comments or document markers, is reported as a
// problem (a workflow needs a name and steps), never a crash.
func TestParseEmptyFile(t *testing.T) {
	for _, src := range []string{"", "\n", "# only a comment\n", "---\n", "---\n...\n", "--- # c\n"} {
		d, ps := testReader.Parse("w.yaml", []byte(src))
		if len(ps) == 0 {
			t.Errorf("testReader.Parse(%q) = %+v, no problems; want one saying what is missing", src, d)
			continue
		}
		if !strings.Contains(ps.Error(), "w.yaml") || !strings.Contains(ps.Error(), "name") {
			t.Errorf("testReader.Parse(%q) problems %q, want them to name the file and the missing name", src, ps.Error())
		}
	}
}
