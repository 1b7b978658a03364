package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/onceflow/onceflow/internal/apicheck"
	"github.com/onceflow/onceflow/onceflowhttp"
)

// apiChecker checks every request that reaches a handler the app builds (serve, and the
// tests that call app.handler) against the OpenAPI document.
var apiChecker *apicheck.Checker

// apiMiddleware wraps the API of every server the tests build, and of those the commands
// they execute build, with the checker (checkAPI).
var apiMiddleware = func(h http.Handler) http.Handler { return h }

// checkAPI wraps every app's handler with the checker.
func checkAPI() {
	c, err := apicheck.New(onceflowhttp.OpenAPI())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	apiChecker = c
	apiMiddleware = func(h http.Handler) http.Handler { return c.Handler(h, nil) }
}

// apiMismatch is the message of the log line a command run as a process of its own (see
// startCommand) writes for an exchange the OpenAPI document does not describe.
const apiMismatch = "OpenAPI document mismatch"

// checkAPIInCommand wraps the handler of a command run as a process of its own with the
// checker; each mismatch is written to stderr at once as a JSON log line, which
// startCommand turns into a test failure.
func checkAPIInCommand() func(http.Handler) http.Handler {
	c, err := apicheck.New(onceflowhttp.OpenAPI())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	report := func(err error) {
		line, _ := json.Marshal(map[string]string{"level": "ERROR", "msg": apiMismatch, "error": err.Error()})
		mu.Lock()
		defer mu.Unlock()
		os.Stderr.Write(append(line, '\n'))
	}
	return func(h http.Handler) http.Handler { return c.Handler(h, report) }
}

// reportAPIProblems prints what the checker found and returns the exit status: code, or 1
// if anything did not match the document.
func reportAPIProblems(code int) int {
	problems := apiChecker.Problems()
	if len(problems) == 0 {
		return code
	}
	fmt.Fprintf(os.Stderr, "FAIL: %d of %d API exchanges do not match the OpenAPI document:\n", len(problems), apiChecker.Checked())
	for _, p := range problems {
		fmt.Fprintf(os.Stderr, "  %v\n", p)
	}
	return 1
}
