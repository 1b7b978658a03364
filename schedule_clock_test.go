package onceflow

import (
	"testing"
	"time"
)

// ticksOn lists the ticks of expr in zone tz on the local calendar day day (YYYY-MM-DD).
func ticksOn(t *testing.T, expr, tz, day string) []time.Time {
	t.Helper()
	c, err := parseCron(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	start, err := time.ParseInLocation("2006-01-02", day, c.loc)
	if err != nil {
		t.Fatal(err)
	}
	end := start.AddDate(0, 0, 1)
	var out []time.Time
	for x := c.next(start.Add(-time.Second)); !x.IsZero() && x.Before(end); x = c.next(x) {
		out = append(out, x)
	}
	return out
}

// On the days the clocks change, an hourly schedule fires once per hour that exists on the
// wall clock (the skipped hour's tick is the instant after the gap, which is also the next
// hour's: one run), and a repeated hour once; a daily schedule at an affected wall time
// fires once, at the next valid instant when the time does not exist.
func TestScheduleDaylightSaving(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name, expr, tz, day string
		count               int
		want                map[int]time.Time // index → instant
	}{
		{"Berlin spring forward hourly", "0 * * * *", "Europe/Berlin", "2026-03-29", 23,
			map[int]time.Time{1: utc("2026-03-29T00:00:00Z"), 2: utc("2026-03-29T01:00:00Z")}},
		{"Berlin spring forward daily 02:30", "30 2 * * *", "Europe/Berlin", "2026-03-29", 1,
			map[int]time.Time{0: utc("2026-03-29T01:00:00Z")}},
		{"Berlin fall back hourly", "0 * * * *", "Europe/Berlin", "2026-10-25", 24,
			map[int]time.Time{2: utc("2026-10-25T00:00:00Z"), 3: utc("2026-10-25T02:00:00Z")}},
		{"Berlin fall back daily 02:30", "30 2 * * *", "Europe/Berlin", "2026-10-25", 1,
			map[int]time.Time{0: utc("2026-10-25T00:30:00Z")}},
		{"New York spring forward hourly", "0 * * * *", "America/New_York", "2026-03-08", 23,
			map[int]time.Time{1: utc("2026-03-08T06:00:00Z"), 2: utc("2026-03-08T07:00:00Z")}},
		{"New York spring forward daily 02:30", "30 2 * * *", "America/New_York", "2026-03-08", 1,
			map[int]time.Time{0: utc("2026-03-08T07:00:00Z")}},
		{"New York fall back hourly", "0 * * * *", "America/New_York", "2026-11-01", 24,
			map[int]time.Time{1: utc("2026-11-01T05:00:00Z"), 2: utc("2026-11-01T07:00:00Z")}},
		{"New York fall back daily 01:30", "30 1 * * *", "America/New_York", "2026-11-01", 1,
			map[int]time.Time{0: utc("2026-11-01T05:30:00Z")}},
		{"New York ordinary day daily 01:30", "30 1 * * *", "America/New_York", "2026-11-02", 1,
			map[int]time.Time{0: utc("2026-11-02T06:30:00Z")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ticksOn(t, tc.expr, tc.tz, tc.day)
			if len(got) != tc.count {
				t.Fatalf("%d ticks, want %d: %v", len(got), tc.count, got)
			}
			for i, w := range tc.want {
				if !got[i].Equal(w) {
					t.Errorf("tick %d = %s (%s), want %s", i, got[i].UTC().Format(time.RFC3339), got[i].Format(time.RFC3339), w.Format(time.RFC3339))
				}
			}
			for i := 1; i < len(got); i++ {
				if !got[i].After(got[i-1]) {
					t.Errorf("ticks %d and %d are not increasing: %s, %s", i-1, i, got[i-1], got[i])
				}
			}
		})
	}
}

func TestSchedulePeriodAndPrevious(t *testing.T) {
	cases := []struct{ expr, at, period, previous string }{
		{"@monthly", "2026-11-01T00:00:00+01:00", "2026-11", "2026-10-01T00:00:00+02:00"},
		{"0 9 1 * *", "2026-12-01T09:00:00+01:00", "2026-12", "2026-11-01T09:00:00+01:00"},
		{"@daily", "2026-11-30T00:00:00+01:00", "2026-11-30", "2026-11-29T00:00:00+01:00"},
		{"0 8 * * 1", "2026-11-30T08:00:00+01:00", "2026-11-30", "2026-11-23T08:00:00+01:00"},
		{"@hourly", "2026-11-30T09:00:00+01:00", "2026-11-30T09", "2026-11-30T08:00:00+01:00"},
		{"*/5 * * * *", "2026-11-30T09:05:00+01:00", "2026-11-30T09:05", "2026-11-30T09:00:00+01:00"},
		{"* * * * * *", "2026-11-30T09:05:07+01:00", "2026-11-30T09:05:07", "2026-11-30T09:05:06+01:00"},
		{"@yearly", "2027-01-01T00:00:00+01:00", "2027", "2026-01-01T00:00:00+01:00"},
	}
	for _, tc := range cases {
		c, err := parseCron(tc.expr, "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		at, _ := time.Parse(time.RFC3339, tc.at)
		if got := c.period(at); got != tc.period {
			t.Errorf("%s: period(%s) = %s, want %s", tc.expr, tc.at, got, tc.period)
		}
		if got := c.previous(at).Format(time.RFC3339); got != tc.previous {
			t.Errorf("%s: previous(%s) = %s, want %s", tc.expr, tc.at, got, tc.previous)
		}
	}
}

func TestParseCronRefuses(t *testing.T) {
	for _, tc := range []struct{ expr, tz string }{
		{"61 * * * *", ""}, {"* * *", ""}, {"@every 1m", ""}, {"0 9 30 2 *", ""}, {"@daily", "Mars/Olympus"}, {"@daily", "Local"},
		{"CRON_TZ=UTC @daily", ""},
	} {
		if _, err := parseCron(tc.expr, tc.tz); err == nil {
			t.Errorf("parseCron(%q, %q): no error", tc.expr, tc.tz)
		}
	}
}
