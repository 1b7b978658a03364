package cli

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release this binary was built as; set it with
// -ldflags "-X github.com/onceflow/onceflow/cmd/onceflow/internal/cli.version=v1.2.3".
var version = "dev"

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of onceflow and how it was built",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			v, rev := buildVersion()
			outf(g.stdout, "onceflow %s\n", v)
			outf(g.stdout, "go        %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if rev != "" {
				outf(g.stdout, "revision  %s\n", rev)
			}
			return nil
		},
	}
}

// buildVersion returns the version (the -ldflags value, else the module version of a
// `go install …@vX` build, else "dev") and the VCS revision recorded at build time.
func buildVersion() (v, revision string) {
	info, ok := debug.ReadBuildInfo()
	return versionOf(info, ok)
}

// versionOf is buildVersion for the build info info (ok false: none).
func versionOf(info *debug.BuildInfo, ok bool) (v, revision string) {
	v = version
	if !ok {
		return v, ""
	}
	if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if revision != "" && modified {
		revision += " (modified)"
	}
	return v, revision
}
