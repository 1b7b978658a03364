package store

import (
	"encoding/json"
	"maps"
)

// EncodeDetail encodes an event's detail object for storage; nil or empty encodes as {}.
// A value that cannot be encoded is replaced by a note saying why, so an audit event is
// never lost to its detail.
func EncodeDetail(m map[string]any) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage(`{}`)
	}
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"detail_error": err.Error()})
	}
	return b
}

// MergeDetail returns base with extra's entries added (extra wins); base is not modified.
func MergeDetail(base, extra map[string]any) map[string]any {
	if len(extra) == 0 {
		return base
	}
	out := make(map[string]any, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
}
