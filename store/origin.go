package store

import (
	"context"
	"encoding/json"
)

// Origin names where an operator's request came from: the console session (its short
// name) and the client's address. A backend adds it to the detail of every event it stores
// in a transaction run under a context that carries one (WithOrigin), as "session" and
// "client", so that the audit trail tells two sessions of one person apart.
type Origin struct {
	Session string
	Client  string
}

type originKey struct{}

// WithOrigin returns ctx carrying o.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginFrom returns the origin ctx carries, if any.
func OriginFrom(ctx context.Context) (Origin, bool) {
	o, ok := ctx.Value(originKey{}).(Origin)
	return o, ok && (o.Session != "" || o.Client != "")
}

// Stamp adds o's session and client to e's detail; entries already there are kept.
func (o Origin) Stamp(e *Event) {
	d := map[string]any{}
	if len(e.Detail) > 0 {
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			return // not an object: left as it is
		}
	}
	if _, ok := d["session"]; !ok && o.Session != "" {
		d["session"] = o.Session
	}
	if _, ok := d["client"]; !ok && o.Client != "" {
		d["client"] = o.Client
	}
	e.Detail = EncodeDetail(d)
}
