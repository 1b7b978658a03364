package onceflow

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// The clock of schedules: which instants a cron expression names in a time zone.
//
// A cron expression names wall-clock times. onceflow walks them on a clock without daylight
// saving (the wall time written as if it were UTC) and maps each to the instant it names in
// the schedule's zone:
//
//   - a wall time that occurs once is that instant;
//   - a wall time that occurs twice (the clock is set back) is its first occurrence, so it
//     fires once;
//   - a wall time that does not exist (the clock is set forward) is the first instant after
//     the gap, e.g. 02:30 on the day New York skips from 02:00 to 03:00 fires at 03:00
//     EDT, once;
//   - wall times that map to the same instant are one tick (an hourly schedule's 02:00 and
//     03:00 on that day are both 03:00 EDT: one run).
//
// A tick is known by that instant, its nominal time, whatever the clock of the process that
// fires it says: the same tick gets the same run key everywhere.

// cronParser accepts the standard five fields, an optional leading seconds field, and the
// descriptors (@yearly, @monthly, @weekly, @daily, @hourly).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronClock is a parsed cron expression in a time zone.
type cronClock struct {
	spec *cron.SpecSchedule // in UTC: it walks wall times
	loc  *time.Location
}

// parseCron parses expr for the zone named tz ("" is UTC).
func parseCron(expr, tz string) (*cronClock, error) {
	if strings.HasPrefix(strings.TrimSpace(expr), "@every") {
		return nil, errors.New("@every is not a calendar schedule; write the times as cron fields, such as */5 * * * * for every 5 minutes")
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "TZ=") || strings.HasPrefix(strings.TrimSpace(expr), "CRON_TZ=") {
		return nil, errors.New("name the time zone with timezone:, not inside the cron expression")
	}
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %v", expr, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("cron expression %q is not a calendar schedule", expr)
	}
	cp := *spec
	cp.Location = time.UTC
	c := &cronClock{spec: &cp, loc: loc}
	if c.next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("cron expression %q names no time that exists (such as February 30)", expr)
	}
	return c, nil
}

// loadZone loads an IANA time zone; "" is UTC.
func loadZone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, errors.New(`timezone "Local" depends on the machine; name an IANA zone such as Europe/Berlin`)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timezone %q is not an IANA time zone such as Europe/Berlin or America/New_York", tz)
	}
	return loc, nil
}

// wall is t's wall clock in loc, written as a UTC time.
func wall(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// resolve returns the instant that wall time w names in loc, by the rules above.
func resolve(w time.Time, loc *time.Location) time.Time {
	var first time.Time
	var offsets []int
	for _, probe := range []time.Duration{-48 * time.Hour, 0, 48 * time.Hour} {
		_, off := w.Add(probe).In(loc).Zone()
		offsets = append(offsets, off)
	}
	for _, off := range offsets {
		c := w.Add(-time.Duration(off) * time.Second)
		if wall(c, loc).Equal(w) && (first.IsZero() || c.Before(first)) {
			first = c
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: the first instant whose wall clock is past w. lo shows a wall time before
	// w, hi one after it.
	lo, hi := w.Add(-48*time.Hour), w.Add(48*time.Hour)
	for _, off := range offsets {
		c := w.Add(-time.Duration(off) * time.Second)
		if wall(c, loc).Before(w) && c.After(lo) {
			lo = c
		}
		if wall(c, loc).After(w) && c.Before(hi) {
			hi = c
		}
	}
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if !mid.After(lo) {
			mid = lo.Add(time.Second)
		}
		if wall(mid, loc).Before(w) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// next returns the first tick strictly after t (zero if there is none within the next
// few years).
func (c *cronClock) next(t time.Time) time.Time {
	w := wall(t, c.loc).Truncate(time.Second)
	for range 100000 {
		w = c.spec.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		if i := resolve(w, c.loc); i.After(t) {
			return i.In(c.loc)
		}
	}
	return time.Time{}
}

// previous returns the last tick strictly before t (zero if none in the five years before).
func (c *cronClock) previous(t time.Time) time.Time {
	for _, span := range []time.Duration{time.Minute, time.Hour, 26 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 5 * 366 * 24 * time.Hour} {
		var last time.Time
		for x := c.next(t.Add(-span)); !x.IsZero() && x.Before(t); x = c.next(x) {
			last = x
		}
		if !last.IsZero() {
			return last
		}
	}
	return time.Time{}
}

// period names the calendar period a tick stands for, at the coarsest unit the schedule
// fires at most once in: 2026 (yearly), 2026-11 (monthly), 2026-11-30 (daily or weekly),
// 2026-11-30T09 (hourly), 2026-11-30T09:05 (every minute), 2026-11-30T09:05:07.
func (c *cronClock) period(tick time.Time) string {
	l := tick.In(c.loc)
	s := c.spec
	const star = 1 << 63
	many := func(field uint64) bool { return bits.OnesCount64(field&^star) > 1 }
	switch {
	case many(s.Second):
		return l.Format("2006-01-02T15:04:05")
	case many(s.Minute):
		return l.Format("2006-01-02T15:04")
	case many(s.Hour):
		return l.Format("2006-01-02T15")
	case many(s.Dom) && s.Dow&star != 0, s.Dow&star == 0:
		return l.Format("2006-01-02")
	case many(s.Month):
		return l.Format("2006-01")
	}
	return l.Format("2006")
}
