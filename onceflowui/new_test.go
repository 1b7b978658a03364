package onceflowui_test

import (
	"strings"
	"testing"

	"github.com/onceflow/onceflow/onceflowui"
)

// A console without a client is a configuration mistake, answered with an error as
// onceflowhttp.NewHandler answers one, not a panic.
func TestNewWithoutClient(t *testing.T) {
	c, err := onceflowui.New(onceflowui.Config{})
	if err == nil || c != nil || !strings.Contains(err.Error(), "Config.Client is required") {
		t.Fatalf("New without a client: %v, %v", c, err)
	}
}
