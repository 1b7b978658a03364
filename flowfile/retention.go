package flowfile

import "time"

// forever is the retention: value that keeps a step's completed effect keys for good.
const forever = "forever"

// retentionOf converts a step's checked retention: field into onceflow.Step.Retention.
// Absent and "forever" are 0, which keeps the key forever: onceflow cannot tell a step that
// moves money or stock from one that sends a reminder, so forgetting a key is something a
// file must ask for, such as retention: 90d on a notification.
func retentionOf(s string) time.Duration {
	if s == "" || s == forever {
		return 0
	}
	d, err := parseDuration(s)
	if err != nil || d <= 0 {
		return 0 // reported by the checks; never shorter than asked
	}
	return d
}
