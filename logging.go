package onceflow

import (
	"context"
	"log/slog"
	"time"
)

// durationHandler is the slog.Handler under the client's logger: it writes every
// time.Duration attribute as Go's duration text ("1.2s", "36h0m0s") instead of a number of
// nanoseconds, whatever handler the program configured, so that the durations in the
// engine's log lines can be read as they are.
type durationHandler struct{ next slog.Handler }

func (h durationHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h durationHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(DurationText(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h durationHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = DurationText(a)
	}
	return durationHandler{next: h.next.WithAttrs(out)}
}

func (h durationHandler) WithGroup(name string) slog.Handler {
	return durationHandler{next: h.next.WithGroup(name)}
}

// DurationText returns a with every time.Duration value (inside groups too) replaced by
// its text, rounded to a millisecond above one second ("1.234s", "36h0m0s", "850µs"). It
// suits slog.HandlerOptions.ReplaceAttr, whose groups argument it does not need:
//
//	slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return onceflow.DurationText(a) }})
func DurationText(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, durationString(v.Duration()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, e := range g {
			out[i] = DurationText(e)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	return a
}

// durationString is d as text, without sub-millisecond noise once d exceeds a second.
func durationString(d time.Duration) string {
	if d > time.Second || d < -time.Second {
		d = d.Round(time.Millisecond)
	}
	return d.String()
}
