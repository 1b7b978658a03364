package onceflowui_test

import (
	"testing"

	"github.com/onceflow/onceflow/internal/testsvc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testsvc.Report(m)) }
