package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// Every duration flag takes the one syntax of workflow files, days included, and refuses
// anything else with a usage error that says how to write one.
func TestDurationFlagsShareOneSyntax(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "d.db")
	runOK(t, "migrate", "--db", db)
	runOK(t, "review", "list", "--db", db, "--older-than", "2d")
	runOK(t, "review", "list", "--db", db, "--older-than", "1d12h")
	runOK(t, "purge", "--db", db, "--older-than", "90d", "--dry-run")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"review", "list", "--older-than", "1.5d"}, `invalid argument "1.5d" for "--older-than" flag: "1.5d" is not a duration: use a whole number of days; write a whole number and a unit, such as 90d, 2w, 36h, 30m`},
		{[]string{"review", "list", "--older-than", "90"}, `"90" is not a duration: it has no unit`},
		{[]string{"purge", "--older-than", "0d"}, `"0d" is not a duration: it must be longer than zero`},
		{[]string{"purge", "--older-than", "-3h"}, `"-3h" is not a duration: it is negative`},
		{[]string{"serve", "--workflows", ".", "--lease", "soon"}, `"soon" is not a duration: it cannot be read`},
		{[]string{"worker", "--workflows", ".", "--shutdown-grace", "3y"}, `"3y" is not a duration: the unit is unknown`},
		{[]string{"bench", "--duration", "10"}, `"10" is not a duration: it has no unit`},
		{[]string{"serve", "--workflows", ".", "--ui-session", "1.5d"}, `invalid argument "1.5d" for "--ui-session" flag: "1.5d" is not a duration: use a whole number of days`},
		{[]string{"serve", "--workflows", ".", "--ui-session", "0s"}, `"0s" is not a duration: it must be longer than zero`},
	} {
		r := run(t, append(tc.args, "--db", db)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("onceflow %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), r.code, r.stderr, exitUsage, tc.want)
		}
	}
}

// The help of a duration flag shows its default in the same syntax.
func TestDurationFlagHelp(t *testing.T) {
	t.Parallel()
	r := runOK(t, "bench", "--help")
	if !strings.Contains(r.stdout, "--duration duration") || !strings.Contains(r.stdout, "(default 10s)") {
		t.Errorf("bench --help:\n%s", r.stdout)
	}
	r = runOK(t, "serve", "--help")
	if !strings.Contains(r.stdout, "--ui-session duration") || !strings.Contains(r.stdout, "(default 8h)") {
		t.Errorf("serve --help:\n%s", r.stdout)
	}
	r = runOK(t, "worker", "--help")
	if !strings.Contains(r.stdout, "--lease duration") {
		t.Errorf("worker --help:\n%s", r.stdout)
	}
}
