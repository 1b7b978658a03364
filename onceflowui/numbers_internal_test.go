package onceflowui

import (
	"strings"
	"testing"
)

// The console shows numbers as they are stored: an id above 2^53 is not printed as its
// float64 neighbour, and a correction from one such id to the next is a change.
func TestNumbersAreShownExactly(t *testing.T) {
	if got := pretty([]byte(`{"customer_id": 9007199254740993, "wide": 18446744073709551617}`)); !strings.Contains(got, "9007199254740993") || !strings.Contains(got, "18446744073709551617") {
		t.Errorf("pretty: %s", got)
	}
	changes := diff([]byte(`{"customer_id": 9007199254740992}`), []byte(`{"customer_id": 9007199254740993}`))
	if len(changes) != 1 || !strings.Contains(changes[0].Before+" "+changes[0].After, "9007199254740992 9007199254740993") {
		t.Errorf("diff of 9007199254740992 → 9007199254740993: %+v", changes)
	}
}
