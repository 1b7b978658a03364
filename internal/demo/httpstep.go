package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow"
)

// poster sends a step's request to a destination and turns the answer into a step result
// or a classified error.
type poster struct {
	client *http.Client
}

// newPoster returns a poster whose requests give up after timeout.
//
// Keep-alives are off so that every attempt is exactly one request on its own connection:
// Go's transport silently re-sends a request that carries an Idempotency-Key when a reused
// connection fails, which would hide from the engine the very failures the demo injects.
func newPoster(timeout time.Duration) *poster {
	return &poster{client: &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

func (p *poster) close() { p.client.CloseIdleConnections() }

// post sends body as JSON to url with the step's effect key as Idempotency-Key.
func (p *poster) post(ctx context.Context, sc *onceflow.StepContext, dest, url string, body any) (any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, onceflow.PermanentError(fmt.Errorf("%s: encode request: %w", dest, err))
	}
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, onceflow.PermanentError(fmt.Errorf("%s: %w", dest, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", sc.EffectKey)
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, transportError(dest, err, wrote.Load())
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		if resp.StatusCode/100 == 2 {
			// The destination acted but its answer was lost.
			return nil, onceflow.UnknownOutcomeError(fmt.Errorf("%s answered %d but the body was cut off: %w", dest, resp.StatusCode, err))
		}
		return nil, fmt.Errorf("%s answered %d and the body was cut off: %w", dest, resp.StatusCode, err)
	}
	sc.RecordResponse(resp.StatusCode, excerptOf(answer))
	return classifyResponse(dest, resp.StatusCode, resp.Header, answer)
}

// transportError classifies a request that got no answer. Before the request was fully
// sent the destination cannot have acted: try again. After it, the destination may have
// acted: the outcome is unknown, and the retry relies on the idempotency key.
func transportError(dest string, err error, wrote bool) error {
	if wrote {
		return onceflow.UnknownOutcomeError(fmt.Errorf("%s: no answer after the request was sent: %w", dest, err))
	}
	return fmt.Errorf("%s: request not sent: %w", dest, err)
}

// classifyResponse turns a destination's answer into the step's output or error:
// 2xx is success (the JSON body is the output); 408, 425, 429 and 5xx are retryable,
// honouring Retry-After; any other status is permanent.
func classifyResponse(dest string, status int, h http.Header, body []byte) (any, error) {
	excerpt := excerptOf(body)
	switch {
	case status >= 200 && status < 300:
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, nil
		}
		if json.Valid(body) {
			return json.RawMessage(body), nil
		}
		return map[string]any{"body": excerpt}, nil
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests, status >= 500:
		return nil, &onceflow.StepError{Class: onceflow.Retryable, RetryAfter: retryAfter(h.Get("Retry-After")),
			ResponseStatus: status, ResponseExcerpt: excerpt, Err: fmt.Errorf("%s answered %d: %s", dest, status, excerpt)}
	default:
		return nil, &onceflow.StepError{Class: onceflow.Permanent,
			ResponseStatus: status, ResponseExcerpt: excerpt, Err: fmt.Errorf("%s answered %d: %s", dest, status, excerpt)}
	}
}

// retryAfter parses a Retry-After value: whole seconds or an HTTP date. It returns 0 when
// the header is absent, malformed or in the past, leaving the delay to the backoff.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

func excerptOf(body []byte) string {
	s := strings.TrimSpace(string(body))
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// errNoLead is returned when a step that needs the CRM's lead finds none.
var errNoLead = errors.New("the crm step has no lead_id in its output")
