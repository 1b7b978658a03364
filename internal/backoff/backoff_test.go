package backoff

import (
	"testing"
	"time"
)

func TestCeilingDoublesUpToMax(t *testing.T) {
	p := Policy{Initial: 2 * time.Second, Max: 20 * time.Second, Multiplier: 2}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second, 20 * time.Second}
	for i, w := range want {
		if got := p.Ceiling(i + 1); got != w {
			t.Errorf("Ceiling(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := p.Ceiling(10000); got != p.Max {
		t.Errorf("Ceiling(10000) = %v, want the cap %v", got, p.Max)
	}
}

func TestDelayIsFullJitter(t *testing.T) {
	p := Policy{Initial: time.Second, Max: time.Minute, Multiplier: 2}
	tests := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0, 0},
		{1, 0.5, 500 * time.Millisecond},
		{3, 0.25, time.Second},
		{3, 0.999999, 3999996 * time.Microsecond},
	}
	for _, tt := range tests {
		if got := p.Delay(tt.attempt, tt.r); got != tt.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tt.attempt, tt.r, got, tt.want)
		}
	}
	if got := p.Delay(3, 1); got >= p.Ceiling(3) {
		t.Errorf("Delay with r=1 = %v, want below the ceiling %v", got, p.Ceiling(3))
	}
}
