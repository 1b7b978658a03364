package bodybudget

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A body that does not fit while others hold the budget is refused, unread; the room comes
// back when the requests holding it are answered; a body without a length takes the limit.
func TestBudget(t *testing.T) {
	b := New(10)
	entered := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(b.Hold(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := b.Take(r, 10); err != nil {
			if errors.Is(err, ErrFull) {
				http.Error(w, "full", http.StatusServiceUnavailable)
			}
			return
		}
		_, _ = io.ReadAll(r.Body)
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	})))
	defer srv.Close()
	post := func(path, body string, chunked bool) (int, error) {
		var rd io.Reader = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // no length: sent chunked
		}
		resp, err := http.Post(srv.URL+path, "text/plain", rd)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	held := make(chan int, 1)
	go func() { code, _ := post("/hold", "12345678", false); held <- code }()
	<-entered // 8 of 10 bytes are held
	if code, err := post("/", "123", false); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("3 bytes while 8 of 10 are held: %d %v; want 503", code, err)
	}
	if code, err := post("/", "12", false); err != nil || code != http.StatusOK {
		t.Errorf("2 bytes while 8 of 10 are held: %d %v; want them read", code, err)
	}
	close(release)
	if code := <-held; code != http.StatusOK {
		t.Fatalf("the held request: %d", code)
	}
	if code, err := post("/", "123", true); err != nil || code != http.StatusOK {
		t.Errorf("a body without a length once the budget is free: %d %v", code, err)
	}
	if b.Max() != 10 || New(0).Max() != 1 {
		t.Errorf("Max: %d, %d", b.Max(), New(0).Max())
	}
}
