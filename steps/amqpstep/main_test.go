package amqpstep_test

import (
	"testing"

	"github.com/onceflow/onceflow/internal/testsvc"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests when one leaves a goroutine running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testsvc.Report(m))
}
