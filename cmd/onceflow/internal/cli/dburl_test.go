package cli

import (
	"strings"
	"testing"
)

func TestParseDBURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		path    string
		wantErr string // substring; "" means success
	}{
		{in: "sqlite:///abs/path.db", path: "/abs/path.db"},
		{in: "sqlite://./rel.db", path: "./rel.db"},
		{in: "sqlite://rel.db", path: "rel.db"},
		{in: "sqlite://data/dir/x.db", path: "data/dir/x.db"},
		{in: "SQLITE:///upper.db", path: "/upper.db"},
		{in: "onceflow.db", path: "onceflow.db"},
		{in: "./onceflow.db", path: "./onceflow.db"},
		{in: "/var/lib/onceflow/onceflow.db", path: "/var/lib/onceflow/onceflow.db"},
		{in: `C:\data\onceflow.db`, path: `C:\data\onceflow.db`},

		{in: "postgres:localhost/onceflow", wantErr: "write postgres:// followed by the address"},
		{in: "postgres:///onceflow", wantErr: "not a PostgreSQL URL"},
		{in: "postgres://localhost/onceflow?schema=Bad-Name", wantErr: "schema \"Bad-Name\" must be lowercase"},
		{in: "mysql://localhost/onceflow", wantErr: `unsupported database "mysql"; accepted forms are sqlite:///abs/path.db`},
		{in: "sqlite:rel.db", wantErr: "write sqlite:// followed by the path"},
		{in: "sqlite://", wantErr: "names no file"},
		{in: "sqlite:///tmp/x.db?mode=ro", wantErr: "options after '?'"},
		{in: "sqlite:///tmp/", wantErr: "names a directory"},
		{in: "", wantErr: "--db is empty"},
		{in: "  ", wantErr: "--db is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			loc, err := parseDBURL(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseDBURL(%q) = %+v, %v; want an error containing %q", tt.in, loc, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseDBURL(%q): %v", tt.in, err)
			}
			if loc.Scheme != "sqlite" || loc.Path != tt.path {
				t.Fatalf("parseDBURL(%q) = %+v; want sqlite %q", tt.in, loc, tt.path)
			}
		})
	}
}

func TestParseDBURLPostgres(t *testing.T) {
	t.Parallel()
	loc, err := parseDBURL("postgres://app:s3cret@db.internal:5432/shop?sslmode=require&schema=onceflow")
	if err != nil {
		t.Fatal(err)
	}
	if loc.Scheme != "postgres" || loc.Schema != "onceflow" || loc.ConnString != "postgres://app:s3cret@db.internal:5432/shop?sslmode=require" {
		t.Fatalf("location %+v", loc)
	}
	if u := loc.URL(); strings.Contains(u, "s3cret") || !strings.Contains(u, "schema=onceflow") {
		t.Fatalf("URL() = %q; want the password masked and the schema kept", u)
	}
	back, err := parseDBURL("postgresql://localhost/onceflow")
	if err != nil || back.Scheme != "postgres" || back.Schema != "" {
		t.Fatalf("postgresql:// = %+v, %v", back, err)
	}
}

func TestDBLocationURLIsAbsolute(t *testing.T) {
	t.Parallel()
	loc, err := parseDBURL("sqlite://./rel.db")
	if err != nil {
		t.Fatal(err)
	}
	u := loc.URL()
	if !strings.HasPrefix(u, "sqlite:///") || !strings.HasSuffix(u, "/rel.db") {
		t.Fatalf("URL() = %q; want sqlite:///…/rel.db", u)
	}
	back, err := parseDBURL(u)
	if err != nil {
		t.Fatalf("parseDBURL(URL()): %v", err)
	}
	if back.URL() != u {
		t.Fatalf("round trip: %q → %q", u, back.URL())
	}
}
