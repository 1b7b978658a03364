package cli

import (
	"fmt"
	"net/http"
	"os"

	"github.com/onceflow/onceflow/internal/apicheck"
	"github.com/onceflow/onceflow/onceflowhttp"
)

// apiChecker checks every request that reaches a handler the app builds (serve, and the
// tests that call app.handler) against the OpenAPI document.
var apiChecker *apicheck.Checker

// checkAPI wraps every app's handler with the checker.
func checkAPI() {
	c, err := apicheck.New(onceflowhttp.OpenAPI())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	apiChecker = c
	wrapHandler = func(h http.Handler) http.Handler { return c.Handler(h, nil) }
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
