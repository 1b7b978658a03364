package onceflowui

import "testing"

// An export's cells never start a spreadsheet formula: a note typed as =HYPERLINK(…) is
// text in the CSV.
func TestExportCellIsNoFormula(t *testing.T) {
	for in, want := range map[string]string{
		`=HYPERLINK("https://evil.example","x")`: `'=HYPERLINK("https://evil.example","x")`,
		"+1 555":                                 "'+1 555", "-2": "'-2", "@SUM(A1)": "'@SUM(A1)", "\tx": "'\tx",
		"run cancelled by token:ops": "run cancelled by token:ops", "": "",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}
