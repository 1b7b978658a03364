package bench

import (
	"slices"
	"testing"
	"time"
)

func TestParseScenarios(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"all", Scenarios},
		{"ledger, steps,ledger", []string{"ledger", "steps"}},
		{"backlog,all", []string{"backlog", "steps", "ingest", "dedupe", "ledger", "batch"}},
		{"STEPS", []string{"steps"}},
	} {
		got, err := ParseScenarios(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseScenarios(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", " , ", "step", "all,x"} {
		if got, err := ParseScenarios(bad); err == nil {
			t.Errorf("ParseScenarios(%q) = %v, want an error", bad, got)
		}
	}
}

func TestQuantiles(t *testing.T) {
	var l latencies
	if p50, p99, m := l.quantiles(); p50 != 0 || p99 != 0 || m != 0 {
		t.Errorf("empty: %v %v %v", p50, p99, m)
	}
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	l.add(d[:50])
	l.add(d[50:])
	if p50, p99, m := l.quantiles(); p50 != 50 || p99 != 99 || m != 100 {
		t.Errorf("1…100 ms: p50 %v, p99 %v, max %v; want 50, 99, 100", p50, p99, m)
	}
}
