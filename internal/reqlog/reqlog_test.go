package reqlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWrap(t *testing.T) {
	var buf bytes.Buffer
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	h := Logger{Log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), Message: "req",
		CatchAll: "/", Debug: func(route string) bool { return route == "GET /healthz" }}.Wrap(mux)
	for _, target := range []string{"/orders/42?token=secret", "/healthz", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
	}
	want := []struct {
		level, route string
		status       int
	}{{"INFO", "GET /orders/{id}", 202}, {"DEBUG", "GET /healthz", 200}, {"INFO", "unmatched", 404}}
	logged := bytes.Clone(buf.Bytes())
	if bytes.Contains(logged, []byte("secret")) || bytes.Contains(logged, []byte("/orders/42")) {
		t.Errorf("the log holds the path or query: %s", logged)
	}
	dec := json.NewDecoder(bytes.NewReader(logged))
	for _, w := range want {
		var line struct {
			Level, Msg, Method, Route string
			Status                    int
		}
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		if line.Level != w.level || line.Msg != "req" || line.Method != "GET" || line.Route != w.route || line.Status != w.status {
			t.Errorf("logged %+v, want %+v", line, w)
		}
	}
}
