package onceflow_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// An entity derived from the input follows the key rules, checked before anything is
// written, on both stores: a 3 KB field (an index row PostgreSQL refuses), a NUL (a text
// PostgreSQL refuses), terminal escapes, a newline, bidi and zero-width characters are
// refused with an InputError naming the input field; nothing is stored. Keys refuse the
// invisible characters too, and an effect key that breaks the rules still parks its step.
func TestEntitiesFollowTheKeyRules(t *testing.T) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st := be.open(t)
			c, err := onceflow.New(onceflow.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []onceflow.Workflow{
				{Name: "lead", Entity: "lead:{input.email}", Steps: []onceflow.Step{{ID: "s", Do: noop}}},
				{Name: "order", Entity: "order:{input.shop}/{input.id}", Steps: []onceflow.Step{{ID: "s", Do: noop}}},
				{Name: "note", Steps: []onceflow.Step{{ID: "crm", EffectKey: "crm:{input.name}", Do: noop}}},
			} {
				if err := c.Register(w); err != nil {
					t.Fatal(err)
				}
			}
			refused := []struct {
				name, value, says string
			}{
				{"3 KB", noise(3000), "3005 bytes long; the limit is 255"},
				{"NUL", "ana\x00@example.com", "control character U+0000"},
				{"terminal escape", "ana\x1b[2J@example.com", "control character U+001B"},
				{"newline", "ana@example.com\nlead:forged", "control character U+000A"},
				{"bidi override", "ana\u202e@example.com", "U+202E"},
				{"zero-width space", "ana\u200b@example.com", "U+200B"},
				{"byte order mark", "\ufeffana@example.com", "U+FEFF"},
				{"padded", "ana@example.com ", "white space"},
			}
			for i, tc := range refused {
				_, err := c.Start(ctx, "lead", "form-"+tc.name, map[string]any{"email": tc.value, "i": i})
				var ie *onceflow.InputError
				if !errors.As(err, &ie) || !errors.Is(err, onceflow.ErrInvalidInput) || ie.Field != "input.email" || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s: Start = %v, want an InputError for input.email saying %q", tc.name, err, tc.says)
					continue
				}
				if len(err.Error()) > 600 {
					t.Errorf("%s: the error echoes %d bytes: %.200s…", tc.name, len(err.Error()), err)
				}
				if strings.ContainsAny(err.Error(), "\x00\x1b\n\u202e\u200b\ufeff") {
					t.Errorf("%s: the error holds the character raw: %q", tc.name, err)
				}
			}
			// Of two fields, the one at fault is named.
			_, err = c.Start(ctx, "order", "o-1", map[string]any{"shop": "berlin", "id": "7\u2066"})
			var ie *onceflow.InputError
			if !errors.As(err, &ie) || ie.Field != "input.id" {
				t.Errorf("two fields: Start = %v, want an InputError for input.id", err)
			}
			// Keys refuse the invisible characters: a visually identical key is no second run.
			for _, key := range []string{"form\u200b-1", "form-1\u202e", "\u2060form-1", "form\u00ad-1", "form-1\U000e0041"} {
				if _, err := c.Start(ctx, "lead", key, map[string]any{"email": "ana@example.com"}); !errors.Is(err, onceflow.ErrInvalidKey) {
					t.Errorf("run key %q: Start = %v, want ErrInvalidKey", key, err)
				}
			}
			runs, err := st.RunList(ctx, store.RunListParams{})
			if err != nil {
				t.Fatal(err)
			}
			events, err := st.EventList(ctx, store.EventListParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 0 || len(events) != 0 {
				t.Fatalf("refused starts wrote %d runs and %d events", len(runs), len(events))
			}
			// A valid entity starts; an effect key that breaks the rules parks the step.
			if _, err := c.Start(ctx, "lead", "form-ok", map[string]any{"email": "ana@example.com"}); err != nil {
				t.Fatal(err)
			}
			run, err := c.Start(ctx, "note", "note-1", map[string]any{"name": "ana\u200dbob"})
			if err != nil {
				t.Fatal(err)
			}
			for {
				n, err := c.Work(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			steps, err := st.StepListByRun(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) != 1 || steps[0].State != store.StateNeedsReview || steps[0].Reason != store.ReasonInvalidKey || !strings.Contains(steps[0].LastError, "U+200D") {
				t.Fatalf("step with a zero-width joiner in its effect key: %+v, want needs_review (invalid_key)", steps[0])
			}
		})
	}
}

// noise is n bytes of hex digits that do not compress: PostgreSQL compresses an index
// entry before it checks its size.
func noise(n int) string {
	var b strings.Builder
	sum := sha256.Sum256([]byte("seed"))
	for b.Len() < n {
		b.WriteString(hex.EncodeToString(sum[:]))
		sum = sha256.Sum256(sum[:])
	}
	return b.String()[:n]
}

// A refused key is quoted in the error only by a short escaped prefix: a 60 KB key is not
// echoed back.
func TestKeyErrorQuotesAShortPrefix(t *testing.T) {
	err := onceflow.ValidateKey("Idempotency-Key", strings.Repeat("k\x1b", 30*1024))
	if err == nil {
		t.Fatal("a 60 KB key was accepted")
	}
	msg := err.Error()
	if len(msg) > 400 || !strings.Contains(msg, "61440 bytes") || strings.Contains(msg, "\x1b") {
		t.Fatalf("error of %d bytes: %.300q", len(msg), msg)
	}
	if got := onceflow.ValidateKey("run key", "a\u202eb").Error(); got != `run key "a\u202eb": has an invisible formatting character U+202E (zero-width, bidi or similar) at byte 1` {
		t.Fatalf("error %q", got)
	}
}
