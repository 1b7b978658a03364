// Package duration is the one syntax onceflow accepts for a length of time, in command
// flags, workflow files and API parameters: Go's durations ("250ms", "30s", "30m",
// "36h", "1h30m") plus whole days and weeks ("90d", "2w", "1d12h"), never negative.
//
// Parse reads one; Format writes one back in the same syntax; Flag is a command-line flag
// value (it satisfies pflag.Value and flag.Value without importing either).
package duration

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Day and Week are the lengths "d" and "w" stand for: 24 and 168 hours, whatever the
// calendar (durations are lengths of time, not dates).
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// Syntax is the reminder every error ends with.
const Syntax = "write a whole number and a unit, such as 90d, 2w, 36h, 30m, 45s or 250ms (units ms, s, m, h, d, w; combined as 1d12h or 1h30m)"

// Error is a text that is not a duration.
type Error struct {
	Text    string
	Problem string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%q is not a duration: %s; %s", e.Text, e.Problem, Syntax)
}

// ErrSyntax is what every *Error is, for errors.Is.
var ErrSyntax = errors.New("not a duration")

// Is reports whether target is ErrSyntax.
func (e *Error) Is(target error) bool { return target == ErrSyntax }

// Parse reads a duration: Go's syntax (time.ParseDuration), with whole weeks ("2w") and
// days ("90d") allowed in front ("1w2d", "1d12h"). Surrounding spaces are ignored; an
// empty text, a negative value, a fraction of a day and a number without a unit ("30")
// other than "0" are errors that say how to write one.
func Parse(s string) (time.Duration, error) {
	text := strings.TrimSpace(s)
	if text == "" {
		return 0, &Error{Text: s, Problem: "it is empty"}
	}
	if strings.HasPrefix(text, "-") {
		return 0, &Error{Text: s, Problem: "it is negative"}
	}
	rest := strings.TrimPrefix(text, "+")
	var total time.Duration
	for _, u := range []struct {
		suffix byte
		unit   time.Duration
		name   string
	}{{'w', Week, "weeks"}, {'d', Day, "days"}} {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i >= len(rest) || rest[i] != u.suffix {
			continue
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil {
			return 0, &Error{Text: s, Problem: "use a whole number of " + u.name}
		}
		if n > int64((1<<63-1)/u.unit) {
			return 0, &Error{Text: s, Problem: "it is too long"}
		}
		total += time.Duration(n) * u.unit
		rest = rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			problem := "it cannot be read"
			switch msg := err.Error(); {
			case strings.Contains(msg, "missing unit"):
				problem = "it has no unit"
			case strings.Contains(msg, "unknown unit"):
				problem = "the unit is unknown"
			}
			return 0, &Error{Text: s, Problem: problem}
		}
		if d < 0 {
			return 0, &Error{Text: s, Problem: "it is negative"}
		}
		if total > 1<<63-1-d {
			return 0, &Error{Text: s, Problem: "it is too long"}
		}
		total += d
	}
	return total, nil
}

// ParsePositive is Parse that also refuses zero, for lengths that must be longer than
// nothing (a retention, an age, a lease).
func ParsePositive(s string) (time.Duration, error) {
	d, err := Parse(s)
	if err == nil && d == 0 {
		return 0, &Error{Text: s, Problem: "it must be longer than zero"}
	}
	return d, err
}

// Format writes d in the syntax Parse reads, as short as it can be said exactly: whole
// days as "90d", the rest as Go does without trailing zero units ("36h", "30m", "1h30m",
// "1d12h", "250ms").
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	neg := d < 0
	if neg {
		d = -d
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if days := d / Day; days > 0 && d%time.Second == 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10) + "d")
		d -= days * Day
		if d == 0 {
			return b.String()
		}
	}
	s := d.String()
	if d%time.Second == 0 {
		// "1h30m0s" → "1h30m", "36h0m0s" → "36h".
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
	}
	b.WriteString(s)
	return b.String()
}

// Flag is a command-line flag holding a duration in Parse's syntax. Register it with
// pflag's FlagSet.Var (or the standard flag package's): its Type is "duration".
type Flag struct {
	// D receives the parsed value.
	D *time.Duration
	// Positive refuses zero.
	Positive bool
}

// NewFlag returns a Flag that stores into p, which is first set to def.
func NewFlag(p *time.Duration, def time.Duration) *Flag {
	*p = def
	return &Flag{D: p}
}

// Set parses s.
func (f *Flag) Set(s string) error {
	parse := Parse
	if f.Positive {
		parse = ParsePositive
	}
	d, err := parse(s)
	if err != nil {
		return err
	}
	*f.D = d
	return nil
}

// String formats the value.
func (f *Flag) String() string {
	if f == nil || f.D == nil || f.Positive && *f.D == 0 {
		return "" // a positive flag at zero is unset
	}
	return Format(*f.D)
}

// Type names the flag's kind in help texts.
func (f *Flag) Type() string { return "duration" }
