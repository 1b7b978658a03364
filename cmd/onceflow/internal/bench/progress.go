package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// progressEvery is how often the progress line is redrawn.
const progressEvery = 200 * time.Millisecond

// progressWidth is the width of the bar, in cells.
const progressWidth = 24

// progress draws one line, rewritten in place with '\r', while a phase of a scenario runs:
// a bar, the phase's name and what it counts. The zero value (no writer) draws nothing.
type progress struct {
	w     io.Writer
	label string // the scenario and database, e.g. "steps sqlite"
}

// phase starts drawing: status returns how far the phase is (0 to 1; negative when
// unknown) and a short text of its figures. stop draws nothing more and clears the line.
func (p progress) phase(name string, status func() (float64, string)) (stop func()) {
	if p.w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		width := 0
		draw := func() {
			frac, text := status()
			line := strings.Join(slices.DeleteFunc([]string{bar(frac), p.label, name, text}, func(s string) bool { return s == "" }), " ")
			pad := ""
			if n := width - len(line); n > 0 {
				pad = strings.Repeat(" ", n)
			}
			width = len(line)
			fmt.Fprintf(p.w, "\r%s%s", line, pad)
		}
		for {
			draw()
			select {
			case <-done:
				fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", width))
				return
			case <-t.C:
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// bar renders frac as [#####.....]; a negative frac (unknown) as a moving marker.
func bar(frac float64) string {
	if frac < 0 {
		pos := int(time.Now().UnixMilli()/int64(progressEvery/time.Millisecond)) % progressWidth
		return "[" + strings.Repeat(" ", pos) + "<=>" + strings.Repeat(" ", progressWidth-pos) + "]"
	}
	frac = min(frac, 1)
	n := int(frac * progressWidth)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", progressWidth-n), frac*100)
}

// counted is the status of a phase that counts up to total things.
func counted(n func() int64, total int64, unit string, started time.Time) func() (float64, string) {
	return func() (float64, string) {
		v := n()
		rate := float64(v) / max(time.Since(started).Seconds(), 1e-9)
		frac := -1.0
		if total > 0 {
			frac = float64(v) / float64(total)
		}
		if total > 0 {
			return frac, fmt.Sprintf("%d/%d %s, %.0f/s", v, total, unit, rate)
		}
		return frac, fmt.Sprintf("%d %s, %.0f/s", v, unit, rate)
	}
}
