package onceflowui

import (
	"strings"
	"testing"
	"time"
)

// Ages read as a person says them, not as Go prints a duration ("1m0s").
func TestAgesReadAsPeopleSay(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-3 * time.Second, "0 s"},
		{0, "0 s"},
		{12 * time.Second, "12 s"},
		{59 * time.Second, "59 s"},
		{time.Minute, "1 min"},
		{90 * time.Second, "2 min"},
		{59 * time.Minute, "59 min"},
		{time.Hour, "1 h"},
		{5*time.Hour + 10*time.Minute, "5 h"},
		{47 * time.Hour, "47 h"},
		{72 * time.Hour, "3 d"},
	} {
		if got := age(c.d); got != c.want {
			t.Errorf("age(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}

// A time is a <time> element with the instant in its datetime (for the page's script to
// show in the viewer's zone) and UTC as its text and title (without the script, and on
// hover).
func TestTimesCarryTheirInstant(t *testing.T) {
	at := time.Date(2026, 3, 1, 9, 30, 5, 0, time.FixedZone("CET", 3600))
	want := `<time class="at" datetime="2026-03-01T08:30:05Z" title="2026-03-01 08:30:05 UTC">2026-03-01 08:30:05 UTC</time>`
	if got := string(when(at)); got != want {
		t.Errorf("when: %s\nwant %s", got, want)
	}
	if got := when(time.Time{}); got != "—" {
		t.Errorf("when(zero) = %s", got)
	}
}

// JSON is shown as the characters it holds: the encoder's HTML escaping would print & < >
// as \u0026 \u003c \u003e (the template escapes them for the page instead).
func TestJSONShowsItsCharacters(t *testing.T) {
	got := pretty([]byte(`{"name":"Müller \u0026 Söhne \u003cGmbH\u003e"}`))
	if want := "{\n  \"name\": \"Müller & Söhne <GmbH>\"\n}"; got != want {
		t.Errorf("pretty: %s\nwant %s", got, want)
	}
	ch := diff([]byte(`{"name":"A"}`), []byte(`{"name":"B & <C>"}`))
	if len(ch) != 1 || ch[0].After != `"B & <C>"` {
		t.Errorf("diff: %+v", ch)
	}
	if strings.Contains(got, `\u00`) {
		t.Errorf("pretty escapes: %s", got)
	}
}
