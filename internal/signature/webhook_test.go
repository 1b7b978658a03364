package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// now is the receiver's clock in the tests.
var now = time.Unix(1700000000, 0)

// sentinels are the errors a delivery can be rejected with.
var sentinels = []error{ErrMissingSignature, ErrMalformed, ErrBadSignature, ErrExpired}

// Secrets of the Standard Webhooks fixtures must be base64.
var (
	swNew   = "whsec_" + base64.StdEncoding.EncodeToString([]byte("new-standard-webhooks-key-32byte"))
	swOld   = "whsec_" + base64.StdEncoding.EncodeToString([]byte("old-standard-webhooks-key-32byte"))
	swOther = base64.StdEncoding.EncodeToString([]byte("some-other-key"))
)

// fixture describes one scheme as the common tests exercise it.
type fixture struct {
	name string
	// cfg returns the scheme's Config with the given secrets.
	cfg                   func(secrets ...string) Config
	newKey, oldKey, other string
	// timestamped says whether the scheme signs a timestamp (and so has a tolerance).
	timestamped bool
	// sigHeader is the header carrying the signature.
	sigHeader string
	// wantID is the Delivery.ID Verify returns for a delivery signed with id "evt_42".
	wantID string
	// combine returns the signature header holding bad's signature, a signature of an
	// unsupported version and good's signature, in that order; nil when the scheme carries
	// a single signature.
	combine func(bad, good string) string
}

func fixtures() []fixture {
	return []fixture{
		{
			name:        "stripe",
			cfg:         func(s ...string) Config { return Config{Scheme: Stripe, Secrets: s} },
			newKey:      "whsec_new",
			oldKey:      "whsec_old",
			other:       "whsec_other",
			timestamped: true,
			sigHeader:   "Stripe-Signature",
			combine: func(bad, good string) string {
				t, badSig, _ := strings.Cut(bad, ",")
				_, goodSig, _ := strings.Cut(good, ",")
				return t + "," + badSig + ",v0=" + strings.Repeat("ab", 32) + "," + goodSig
			},
		},
		{
			name:        "standard-webhooks",
			cfg:         func(s ...string) Config { return Config{Scheme: StandardWebhooks, Secrets: s} },
			newKey:      swNew,
			oldKey:      swOld,
			other:       swOther,
			timestamped: true,
			sigHeader:   "webhook-signature",
			wantID:      "evt_42",
			combine: func(bad, good string) string {
				return bad + " v1a,c29tZSBhc3ltbWV0cmljIHNpZ25hdHVyZQ== " + good
			},
		},
		{
			name:      "github",
			cfg:       func(s ...string) Config { return Config{Scheme: GitHub, Secrets: s} },
			newKey:    "new github secret",
			oldKey:    "old github secret",
			other:     "other github secret",
			sigHeader: "X-Hub-Signature-256",
			wantID:    "evt_42",
		},
		{
			name: "hmac hex with prefix",
			cfg: func(s ...string) Config {
				return Config{Scheme: HMAC, Secrets: s, Header: "X-Signature", Prefix: "sha256="}
			},
			newKey:    "new-hmac",
			oldKey:    "old-hmac",
			other:     "other-hmac",
			sigHeader: "X-Signature",
		},
		{
			name: "hmac base64 with timestamp",
			cfg: func(s ...string) Config {
				return Config{Scheme: HMAC, Secrets: s, Header: "X-Signature", Encoding: "base64", TimestampHeader: "X-Timestamp", Tolerance: 10 * time.Minute}
			},
			newKey:      "new-hmac",
			oldKey:      "old-hmac",
			other:       "other-hmac",
			timestamped: true,
			sigHeader:   "X-Signature",
		},
	}
}

func mustSign(t *testing.T, cfg Config, i int, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	h, err := Sign(cfg, i, id, ts, body)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return h
}

// checkErr fails t unless err wraps want (nil meaning success), and checks that a
// rejection's message leaks no secret and no signature.
func checkErr(t *testing.T, err, want error, leaks ...string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Verify: %v, want success", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("Verify error = %v, want one wrapping %v", err, want)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Errorf("error %v also wraps %v", err, s)
		}
	}
	for _, l := range leaks {
		if l != "" && strings.Contains(err.Error(), l) {
			t.Errorf("error %q contains a secret or signature %q", err, l)
		}
	}
}

// TestVerify runs the cases every scheme shares.
func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_42","type":"payment_intent.succeeded","amount":4200}`)
	type tc struct {
		name string
		// signWith are the signer's secrets; it signs with the first.
		signWith func(f fixture) []string
		// verifyWith are the receiver's secrets.
		verifyWith func(f fixture) []string
		// sentAt returns the send time given the receiver's tolerance; nil means now.
		sentAt func(tol time.Duration) time.Time
		// edit changes the headers and body before Verify.
		edit func(f fixture, h http.Header, body []byte) (http.Header, []byte)
		want error
		// onlyTimestamped and onlyMulti restrict a case to the schemes it applies to;
		// onlyUntimestamped the opposite.
		onlyTimestamped, onlyUntimestamped, onlyMulti bool
	}
	cur := func(f fixture) []string { return []string{f.newKey} }
	at := func(d time.Duration) func(time.Duration) time.Time {
		return func(time.Duration) time.Time { return now.Add(d) }
	}
	edge := func(sign time.Duration) func(time.Duration) time.Time {
		return func(tol time.Duration) time.Time { return now.Add(sign * tol) }
	}
	beyond := func(sign time.Duration) func(time.Duration) time.Time {
		return func(tol time.Duration) time.Time { return now.Add(sign * (tol + time.Second)) }
	}
	old := func(f fixture) []string { return []string{f.oldKey} }
	tests := []tc{
		{name: "valid", want: nil},
		{name: "valid, signed with the second secret", verifyWith: func(f fixture) []string { return []string{f.oldKey, f.newKey} }},
		{
			name: "tampered body",
			edit: func(_ fixture, h http.Header, b []byte) (http.Header, []byte) {
				return h, []byte(strings.Replace(string(b), "4200", "4201", 1))
			},
			want: ErrBadSignature,
		},
		{
			name: "body with a trailing newline",
			edit: func(_ fixture, h http.Header, b []byte) (http.Header, []byte) {
				return h, append(append([]byte{}, b...), '\n')
			},
			want: ErrBadSignature,
		},
		{name: "wrong secret", signWith: func(f fixture) []string { return []string{f.other} }, want: ErrBadSignature},
		{name: "rotation: old secret still listed", signWith: old, verifyWith: func(f fixture) []string { return []string{f.newKey, f.oldKey} }},
		{name: "rotation: old secret removed", signWith: old, verifyWith: cur, want: ErrBadSignature},
		{name: "too old", sentAt: at(-time.Hour), want: ErrExpired, onlyTimestamped: true},
		{name: "too far in the future", sentAt: at(time.Hour), want: ErrExpired, onlyTimestamped: true},
		{name: "one second too old", sentAt: beyond(-1), want: ErrExpired, onlyTimestamped: true},
		{name: "one second too far in the future", sentAt: beyond(1), want: ErrExpired, onlyTimestamped: true},
		{name: "at the edge of the tolerance, past", sentAt: edge(-1), onlyTimestamped: true},
		{name: "at the edge of the tolerance, future", sentAt: edge(1), onlyTimestamped: true},
		{name: "no timestamp: an old delivery passes", sentAt: at(-30 * 24 * time.Hour), onlyUntimestamped: true},
		{
			name: "missing signature header",
			edit: func(f fixture, h http.Header, b []byte) (http.Header, []byte) {
				h.Del(f.sigHeader)
				return h, b
			},
			want: ErrMissingSignature,
		},
		{
			name: "no headers at all",
			edit: func(_ fixture, _ http.Header, b []byte) (http.Header, []byte) {
				return http.Header{}, b
			},
			want: ErrMissingSignature,
		},
		{
			name: "signature header is garbage",
			edit: func(f fixture, h http.Header, b []byte) (http.Header, []byte) {
				h.Set(f.sigHeader, "garbage")
				return h, b
			},
			want: ErrMalformed,
		},
		{
			name: "several signatures, one matches",
			edit: func(f fixture, h http.Header, b []byte) (http.Header, []byte) {
				bad := mustSign(t, f.cfg(f.other), 0, "evt_42", now, b)
				h.Set(f.sigHeader, f.combine(bad.Get(f.sigHeader), h.Get(f.sigHeader)))
				return h, b
			},
			onlyMulti: true,
		},
		{
			name:     "several signatures, none matches",
			signWith: func(f fixture) []string { return []string{f.oldKey} },
			edit: func(f fixture, h http.Header, b []byte) (http.Header, []byte) {
				bad := mustSign(t, f.cfg(f.other), 0, "evt_42", now, b)
				h.Set(f.sigHeader, f.combine(bad.Get(f.sigHeader), h.Get(f.sigHeader)))
				return h, b
			},
			verifyWith: cur,
			want:       ErrBadSignature,
			onlyMulti:  true,
		},
	}
	for _, f := range fixtures() {
		for _, tt := range tests {
			if tt.onlyTimestamped && !f.timestamped || tt.onlyUntimestamped && f.timestamped || tt.onlyMulti && f.combine == nil {
				continue
			}
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				signWith, verifyWith := cur(f), cur(f)
				if tt.signWith != nil {
					signWith = tt.signWith(f)
				}
				if tt.verifyWith != nil {
					verifyWith = tt.verifyWith(f)
				}
				cfg := f.cfg(verifyWith...)
				sentAt := now
				if tt.sentAt != nil {
					sentAt = tt.sentAt(cfg.tolerance())
				}
				h := mustSign(t, f.cfg(signWith...), 0, "evt_42", sentAt, body)
				sig := h.Get(f.sigHeader)
				b := body
				if tt.edit != nil {
					h, b = tt.edit(f, h, b)
				}
				d, err := Verify(cfg, h, b, now)
				checkErr(t, err, tt.want, f.newKey, f.oldKey, f.other, sig)
				if err != nil {
					return
				}
				if d.ID != f.wantID {
					t.Errorf("ID = %q, want %q", d.ID, f.wantID)
				}
				wantTS := time.Time{}
				if f.timestamped {
					wantTS = sentAt.UTC()
				}
				if !d.Timestamp.Equal(wantTS) || d.Timestamp.Location() != wantTS.Location() {
					t.Errorf("Timestamp = %v, want %v", d.Timestamp, wantTS)
				}
			})
		}
	}
}

// TestVerifyHeaders covers each scheme's missing and malformed headers.
func TestVerifyHeaders(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1"}`)
	hex64 := strings.Repeat("0", 64)
	b64 := base64.StdEncoding.EncodeToString(make([]byte, 32))
	ts := strconv.FormatInt(now.Unix(), 10)
	stripe := Config{Scheme: Stripe, Secrets: []string{"whsec_x"}}
	sw := Config{Scheme: StandardWebhooks, Secrets: []string{swNew}}
	gh := Config{Scheme: GitHub, Secrets: []string{"secret-of-the-test"}}
	hx := Config{Scheme: HMAC, Secrets: []string{"secret-of-the-test"}, Header: "X-Sig", Prefix: "sha256="}
	hb := Config{Scheme: HMAC, Secrets: []string{"secret-of-the-test"}, Header: "X-Sig", Encoding: "base64", TimestampHeader: "X-Sig-Timestamp"}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	swHdr := func(id, t, sig string) http.Header {
		return hdr("webhook-id", id, "webhook-timestamp", t, "webhook-signature", sig)
	}
	tests := []struct {
		name    string
		cfg     Config
		h       http.Header
		want    error
		message string // a substring the error must contain
	}{
		{"stripe/missing", stripe, hdr(), ErrMissingSignature, "Stripe-Signature header is missing"},
		{"stripe/no equals sign", stripe, hdr("Stripe-Signature", "t"+ts+",v1="+hex64), ErrMalformed, "item 1 has no '='"},
		{"stripe/no timestamp", stripe, hdr("Stripe-Signature", "v1="+hex64), ErrMalformed, "no t= timestamp"},
		{"stripe/timestamp not a number", stripe, hdr("Stripe-Signature", "t=soon,v1="+hex64), ErrMalformed, `timestamp "soon" is not a time in Unix seconds`},
		{"stripe/negative timestamp", stripe, hdr("Stripe-Signature", "t=-1,v1="+hex64), ErrMalformed, "Unix seconds"},
		{"stripe/signed timestamp", stripe, hdr("Stripe-Signature", "t=+"+ts+",v1="+hex64), ErrMalformed, "Unix seconds"},
		{"stripe/timestamp overflows", stripe, hdr("Stripe-Signature", "t=99999999999999999999,v1="+hex64), ErrMalformed, "Unix seconds"},
		{"stripe/two timestamps", stripe, hdr("Stripe-Signature", "t="+ts+",t="+ts+",v1="+hex64), ErrMalformed, "more than one t="},
		{"stripe/v1 not hex", stripe, hdr("Stripe-Signature", "t="+ts+",v1="+strings.Repeat("z", 64)), ErrMalformed, "item 2 is not a v1 signature of 64 hex digits"},
		{"stripe/v1 too short", stripe, hdr("Stripe-Signature", "t="+ts+",v1=abcd"), ErrMalformed, "64 hex digits"},
		{"stripe/v1 empty", stripe, hdr("Stripe-Signature", "t="+ts+",v1="), ErrMalformed, "64 hex digits"},
		{"stripe/only v0", stripe, hdr("Stripe-Signature", "t="+ts+",v0="+hex64), ErrMissingSignature, "no v1 signature"},
		{"stripe/only timestamp", stripe, hdr("Stripe-Signature", "t="+ts), ErrMissingSignature, "no v1 signature"},
		{"stripe/wrong signature", stripe, hdr("Stripe-Signature", "t="+ts+",v1="+hex64), ErrBadSignature, "matches any of the 1 configured secrets"},
		{"stripe/expired message", stripe, hdr("Stripe-Signature", "t="+strconv.FormatInt(now.Add(-2*time.Hour).Unix(), 10)+",v1="+hex64), ErrExpired,
			"Stripe-Signature timestamp 1699992800 is 2h0m0s in the past; the tolerance is 5m0s"},

		{"standard-webhooks/all missing", sw, hdr(), ErrMissingSignature, "webhook-id, webhook-timestamp, webhook-signature headers are missing"},
		{"standard-webhooks/id missing", sw, swHdr("", ts, "v1,"+b64), ErrMissingSignature, "webhook-id header is missing"},
		{"standard-webhooks/timestamp missing", sw, swHdr("msg_1", "", "v1,"+b64), ErrMissingSignature, "webhook-timestamp header is missing"},
		{"standard-webhooks/signature missing", sw, swHdr("msg_1", ts, ""), ErrMissingSignature, "webhook-signature header is missing"},
		{"standard-webhooks/timestamp not a number", sw, swHdr("msg_1", "1.5", "v1,"+b64), ErrMalformed, `webhook-timestamp "1.5"`},
		{"standard-webhooks/entry without comma", sw, swHdr("msg_1", ts, "v1"+b64), ErrMalformed, "entry 1 has no ','"},
		{"standard-webhooks/not base64", sw, swHdr("msg_1", ts, "v1,"+strings.Repeat("!", 44)), ErrMalformed, "entry 1 is not v1,"},
		{"standard-webhooks/url-safe base64", sw, swHdr("msg_1", ts, "v1,"+strings.Repeat("_", 43)+"="), ErrMalformed, "standard padded base64"},
		{"standard-webhooks/too short", sw, swHdr("msg_1", ts, "v1,AAAA"), ErrMalformed, "32-byte"},
		{"standard-webhooks/only other versions", sw, swHdr("msg_1", ts, "v1a,"+b64+" v2,"+b64), ErrMissingSignature, "no v1 entry"},
		{"standard-webhooks/only spaces", sw, swHdr("msg_1", ts, "   "), ErrMissingSignature, "no v1 entry"},
		{"standard-webhooks/wrong signature", sw, swHdr("msg_1", ts, "v1,"+b64), ErrBadSignature, "base64-decoded secret"},
		{"standard-webhooks/future", sw, swHdr("msg_1", strconv.FormatInt(now.Add(time.Hour).Unix(), 10), "v1,"+b64), ErrExpired, "1h0m0s in the future"},

		{"github/missing", gh, hdr("X-GitHub-Delivery", "d1"), ErrMissingSignature, "X-Hub-Signature-256 header is missing"},
		{"github/only legacy sha1", gh, hdr("X-Hub-Signature", "sha1="+strings.Repeat("0", 40)), ErrMissingSignature, "legacy SHA-1"},
		{"github/sha1 prefix", gh, hdr("X-Hub-Signature-256", "sha1="+hex64), ErrMalformed, `does not start with "sha256="`},
		{"github/no prefix", gh, hdr("X-Hub-Signature-256", hex64), ErrMalformed, `does not start with "sha256="`},
		{"github/not hex", gh, hdr("X-Hub-Signature-256", "sha256="+strings.Repeat("g", 64)), ErrMalformed, "64 hex digits"},
		{"github/too short", gh, hdr("X-Hub-Signature-256", "sha256="+hex64[:62]), ErrMalformed, "64 hex digits"},
		{"github/wrong signature", gh, hdr("X-Hub-Signature-256", "sha256="+hex64), ErrBadSignature, "none of the 1 configured secrets"},

		{"hmac/missing", hx, hdr(), ErrMissingSignature, "X-Sig header is missing"},
		{"hmac/prefix missing", hx, hdr("X-Sig", hex64), ErrMalformed, `X-Sig does not start with "sha256="`},
		{"hmac/not hex", hx, hdr("X-Sig", "sha256="+b64), ErrMalformed, "hex of a 32-byte signature"},
		{"hmac/wrong signature", hx, hdr("X-Sig", "sha256="+hex64), ErrBadSignature, "sign the body"},
		{"hmac/timestamp missing", hb, hdr("X-Sig", b64), ErrMissingSignature, "X-Sig-Timestamp header is missing"},
		{"hmac/timestamp not a number", hb, hdr("X-Sig", b64, "X-Sig-Timestamp", "yesterday"), ErrMalformed, `X-Sig-Timestamp "yesterday"`},
		{"hmac/not base64", hb, hdr("X-Sig", hex64, "X-Sig-Timestamp", ts), ErrMalformed, "base64 of a 32-byte signature"},
		{"hmac/base64 with a line break", hb, hdr("X-Sig", b64[:20]+"\n"+b64[20:], "X-Sig-Timestamp", ts), ErrMalformed, "base64"},
		{"hmac/expired", hb, hdr("X-Sig", b64, "X-Sig-Timestamp", "1"), ErrExpired, "X-Sig-Timestamp 1 is"},
		{"hmac/wrong signature with timestamp", hb, hdr("X-Sig", b64, "X-Sig-Timestamp", ts), ErrBadSignature, `sign "{timestamp}.{body}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := Verify(tt.cfg, tt.h, body, now)
			if d != nil {
				t.Errorf("Verify returned a Delivery with error %v", err)
			}
			checkErr(t, err, tt.want, tt.cfg.Secrets...)
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not say %q", err, tt.message)
			}
			if !strings.HasPrefix(err.Error(), "webhook: verify ") {
				t.Errorf("error %q does not name the operation", err)
			}
		})
	}
}

// TestStandardWebhooksSpecExample is the worked example from the Standard Webhooks
// specification.
func TestStandardWebhooksSpecExample(t *testing.T) {
	t.Parallel()
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	for _, secret := range []string{secret, strings.TrimPrefix(secret, "whsec_")} {
		cfg := Config{Scheme: StandardWebhooks, Secrets: []string{secret}}
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", "1614265330")
		h.Set("webhook-signature", want)
		d, err := Verify(cfg, h, body, ts)
		if err != nil {
			t.Fatalf("Verify(secret %q): %v", secret, err)
		}
		if d.ID != id || !d.Timestamp.Equal(ts) {
			t.Errorf("Delivery = %+v, want ID %q at %v", d, id, ts)
		}
		signed := mustSign(t, cfg, 0, id, ts, body)
		if got := signed.Get("webhook-signature"); got != want {
			t.Errorf("Sign: webhook-signature = %q, want %q", got, want)
		}
		// The example is from 2021: at any later time it is a replay.
		_, err = Verify(cfg, h, body, ts.Add(2*time.Hour))
		checkErr(t, err, ErrExpired)
		if msg := "webhook-timestamp 1614265330 is 2h0m0s in the past; the tolerance is 5m0s"; !strings.Contains(err.Error(), msg) {
			t.Errorf("error %q does not say %q", err, msg)
		}
	}
}

// TestGitHubDocsExample is the example from GitHub's "Validating webhook deliveries".
func TestGitHubDocsExample(t *testing.T) {
	t.Parallel()
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	cfg := Config{Scheme: GitHub, Secrets: []string{"It's a Secret to Everybody"}}
	body := []byte("Hello, World!")
	h := http.Header{}
	h.Set("X-Hub-Signature-256", want)
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	d, err := Verify(cfg, h, body, time.Time{})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if d.ID != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || !d.Timestamp.IsZero() {
		t.Errorf("Delivery = %+v", d)
	}
	// Hex is accepted in either case.
	h.Set("X-Hub-Signature-256", "sha256="+strings.ToUpper(strings.TrimPrefix(want, "sha256=")))
	if _, err := Verify(cfg, h, body, time.Time{}); err != nil {
		t.Errorf("Verify with upper-case hex: %v", err)
	}
	if got := mustSign(t, cfg, 0, "", time.Time{}, body).Get("X-Hub-Signature-256"); got != want {
		t.Errorf("Sign: X-Hub-Signature-256 = %q, want %q", got, want)
	}
}

// TestStripeIndependentVector computes Stripe's signature with the algorithm written out:
// HMAC-SHA256 keyed with the whole whsec_ secret over "{t}.{body}", in hex.
func TestStripeIndependentVector(t *testing.T) {
	t.Parallel()
	const secret = "whsec_test_secret"
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("1700000000." + string(body)))
	want := "t=1700000000,v1=" + hex.EncodeToString(m.Sum(nil))

	cfg := Config{Scheme: Stripe, Secrets: []string{secret}}
	h := http.Header{}
	h.Set("Stripe-Signature", want)
	d, err := Verify(cfg, h, body, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if d.ID != "" || d.Timestamp.Unix() != 1700000000 {
		t.Errorf("Delivery = %+v", d)
	}
	if got := mustSign(t, cfg, 0, "ignored", time.Unix(1700000000, 0), body).Get("Stripe-Signature"); got != want {
		t.Errorf("Sign: Stripe-Signature = %q, want %q", got, want)
	}
	// Keyed with the secret minus its whsec_ prefix it must fail: Stripe keys with the
	// whole string.
	m = hmac.New(sha256.New, []byte("test_secret"))
	m.Write([]byte("1700000000." + string(body)))
	h.Set("Stripe-Signature", "t=1700000000,v1="+hex.EncodeToString(m.Sum(nil)))
	_, err = Verify(cfg, h, body, time.Unix(1700000000, 0))
	checkErr(t, err, ErrBadSignature)
}

// TestHMACIndependentVectors computes generic HMAC signatures with the algorithm written
// out.
func TestHMACIndependentVectors(t *testing.T) {
	t.Parallel()
	const secret = "generic-secret"
	body := []byte(`{"event":"order.paid","id":"ord_9"}`)
	sum := func(content string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(content))
		return m.Sum(nil)
	}
	tests := []struct {
		name string
		cfg  Config
		h    http.Header
	}{
		{
			name: "hex, no prefix",
			cfg:  Config{Scheme: HMAC, Secrets: []string{secret}, Header: "X-Signature"},
			h:    http.Header{"X-Signature": {hex.EncodeToString(sum(string(body)))}},
		},
		{
			name: "base64 with prefix",
			cfg:  Config{Scheme: HMAC, Secrets: []string{secret}, Header: "X-Shop-Hmac", Encoding: "base64", Prefix: "v1="},
			h:    http.Header{"X-Shop-Hmac": {"v1=" + base64.StdEncoding.EncodeToString(sum(string(body)))}},
		},
		{
			name: "hex with timestamp",
			cfg:  Config{Scheme: HMAC, Secrets: []string{secret}, Header: "X-Signature", TimestampHeader: "X-Signature-Timestamp"},
			h: http.Header{
				"X-Signature":           {hex.EncodeToString(sum("1700000000." + string(body)))},
				"X-Signature-Timestamp": {"1700000000"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Verify(tt.cfg, tt.h, body, now); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			signed := mustSign(t, tt.cfg, 0, "", now, body)
			for k := range tt.h {
				if signed.Get(k) != tt.h.Get(k) {
					t.Errorf("Sign: %s = %q, want %q", k, signed.Get(k), tt.h.Get(k))
				}
			}
			if len(signed) != len(tt.h) {
				t.Errorf("Sign set %d headers, want %d: %v", len(signed), len(tt.h), signed)
			}
		})
	}
}

func TestParseScheme(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Scheme
	}{
		{"stripe", Stripe},
		{"standard-webhooks", StandardWebhooks},
		{"standard_webhooks", StandardWebhooks},
		{"github", GitHub},
		{"hmac", HMAC},
		{" GitHub ", GitHub},
	}
	for _, tt := range tests {
		got, err := ParseScheme(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseScheme(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		if tt.in == tt.want.String() {
			continue
		}
		if back, err := ParseScheme(got.String()); err != nil || back != got {
			t.Errorf("ParseScheme(%v.String()) = %v, %v", got, back, err)
		}
	}
	for _, bad := range []string{"", "svix", "standardwebhooks", "hmac-sha256"} {
		_, err := ParseScheme(bad)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseScheme(%q) error = %v, want ErrInvalidConfig", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), "stripe, standard-webhooks, github, hmac") {
			t.Errorf("ParseScheme(%q) error %q does not list the schemes", bad, err)
		}
	}
	if got := Scheme(0).String(); got != "Scheme(0)" {
		t.Errorf("Scheme(0).String() = %q", got)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	const secretText = "s3cr3t-value"
	tests := []struct {
		name    string
		cfg     Config
		message string // "" means valid
	}{
		{"stripe", Config{Scheme: Stripe, Secrets: []string{"whsec_abc"}}, ""},
		{"standard webhooks with prefix", Config{Scheme: StandardWebhooks, Secrets: []string{swNew}}, ""},
		{"standard webhooks without prefix", Config{Scheme: StandardWebhooks, Secrets: []string{strings.TrimPrefix(swNew, "whsec_")}}, ""},
		{"github", Config{Scheme: GitHub, Secrets: []string{"It's a Secret to Everybody"}, Tolerance: time.Minute}, ""},
		{"hmac, all options", Config{Scheme: HMAC, Secrets: []string{"a", "b"}, Header: "X-Sig", Encoding: "base64", Prefix: "sha256=", TimestampHeader: "X-Ts"}, ""},
		{"no scheme", Config{Secrets: []string{"x"}}, "Scheme is not set; set it to one of stripe, standard-webhooks, github, hmac"},
		{"unknown scheme", Config{Scheme: 9, Secrets: []string{"x"}}, "Scheme 9 is unknown"},
		{"no secrets", Config{Scheme: Stripe}, "no secrets for the stripe scheme; set Secrets"},
		{"empty secret", Config{Scheme: GitHub, Secrets: []string{secretText, ""}}, "secret 2 of 2 is empty"},
		{"secret with a newline", Config{Scheme: GitHub, Secrets: []string{secretText + "\n"}}, "secret 1 of 1 has leading or trailing whitespace"},
		{"standard webhooks secret not base64", Config{Scheme: StandardWebhooks, Secrets: []string{"whsec_" + secretText + "!"}}, "secret 1 of 1 is not valid base64"},
		{"standard webhooks secret only a prefix", Config{Scheme: StandardWebhooks, Secrets: []string{"whsec_"}}, "empty after the whsec_ prefix"},
		{"negative tolerance", Config{Scheme: Stripe, Secrets: []string{"x"}, Tolerance: -time.Second}, "Tolerance is negative (-1s)"},
		{"hmac without header", Config{Scheme: HMAC, Secrets: []string{"x"}}, "needs Header"},
		{"hmac header with a space", Config{Scheme: HMAC, Secrets: []string{"x"}, Header: "X Sig"}, "not a valid header name"},
		{"hmac timestamp header with a colon", Config{Scheme: HMAC, Secrets: []string{"x"}, Header: "X-Sig", TimestampHeader: "X-Ts:"}, "TimestampHeader"},
		{"hmac same header twice", Config{Scheme: HMAC, Secrets: []string{"x"}, Header: "X-Sig", TimestampHeader: "x-sig"}, "the same header"},
		{"hmac unknown encoding", Config{Scheme: HMAC, Secrets: []string{"x"}, Header: "X-Sig", Encoding: "b64"}, `Encoding "b64" is unknown; use "hex" (the default) or "base64"`},
		{"hmac options on github", Config{Scheme: GitHub, Secrets: []string{"x"}, Prefix: "sha256="}, "apply only to the hmac scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.message == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("Validate = %q, want it to say %q", err, tt.message)
			}
			if strings.Contains(err.Error(), secretText) {
				t.Errorf("Validate = %q leaks the secret", err)
			}
			// Verify and Sign refuse the same config with the same error.
			if _, verr := Verify(tt.cfg, http.Header{}, nil, now); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Verify error = %v, want %v", verr, err)
			}
			if _, serr := Sign(tt.cfg, 0, "id", now, nil); serr == nil || serr.Error() != err.Error() {
				t.Errorf("Sign error = %v, want %v", serr, err)
			}
		})
	}
}

func TestSignErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		index   int
		id      string
		ts      time.Time
		message string
	}{
		{"index too large", Config{Scheme: GitHub, Secrets: []string{"a"}}, 1, "", now, "secret index 1 is out of range; Secrets has 1 entries"},
		{"negative index", Config{Scheme: GitHub, Secrets: []string{"a"}}, -1, "", now, "secret index -1 is out of range"},
		{"standard webhooks without id", Config{Scheme: StandardWebhooks, Secrets: []string{swNew}}, 0, "", now, "message id is empty"},
		{"stripe with the zero time", Config{Scheme: Stripe, Secrets: []string{"a"}}, 0, "", time.Time{}, "before 1970"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Sign(tt.cfg, tt.index, tt.id, tt.ts, nil)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("Sign error = %v, want ErrInvalidConfig saying %q", err, tt.message)
			}
		})
	}
	// GitHub ignores the timestamp, so the zero time is fine there.
	if _, err := Sign(Config{Scheme: GitHub, Secrets: []string{"a"}}, 0, "", time.Time{}, nil); err != nil {
		t.Errorf("Sign(github, zero time): %v", err)
	}
}

// FuzzVerify checks that Verify never panics and never accepts a delivery whose headers do
// not contain the correct signature. The fuzzer supplies the header values and the body;
// the oracle computes the expected signature with the algorithms written out.
func FuzzVerify(f *testing.F) {
	const (
		newSecret = "whsec_fuzz_new"
		oldSecret = "whsec_fuzz_old"
	)
	swKeyNew, swKeyOld := []byte("fuzz-standard-new"), []byte("fuzz-standard-old")
	configs := []Config{
		{Scheme: Stripe, Secrets: []string{newSecret, oldSecret}},
		{Scheme: StandardWebhooks, Secrets: []string{
			"whsec_" + base64.StdEncoding.EncodeToString(swKeyNew),
			base64.StdEncoding.EncodeToString(swKeyOld),
		}},
		{Scheme: GitHub, Secrets: []string{newSecret, oldSecret}},
		{Scheme: HMAC, Secrets: []string{newSecret, oldSecret}, Header: "X-Signature", Prefix: "sha256="},
		{Scheme: HMAC, Secrets: []string{newSecret, oldSecret}, Header: "X-Signature", Encoding: "base64", TimestampHeader: "X-Timestamp"},
	}
	keys := func(kind int) [][]byte {
		if configs[kind].Scheme == StandardWebhooks {
			return [][]byte{swKeyNew, swKeyOld}
		}
		return [][]byte{[]byte(newSecret), []byte(oldSecret)}
	}
	// headers builds the request headers from the fuzzed values.
	headers := func(kind int, id, ts, sig string) http.Header {
		h := http.Header{}
		switch kind {
		case 0:
			h.Set("Stripe-Signature", "t="+ts+","+sig)
		case 1:
			h.Set("webhook-id", id)
			h.Set("webhook-timestamp", ts)
			h.Set("webhook-signature", sig)
		case 2:
			h.Set("X-Hub-Signature-256", sig)
			h.Set("X-GitHub-Delivery", id)
		case 3:
			h.Set("X-Signature", sig)
		case 4:
			h.Set("X-Signature", sig)
			h.Set("X-Timestamp", ts)
		}
		return h
	}

	// sigOf is the signature part of signed headers, as the fuzz function takes it.
	sigOf := func(kind int, h http.Header) string {
		switch kind {
		case 0:
			_, sig, _ := strings.Cut(h.Get("Stripe-Signature"), ",")
			return sig
		case 1:
			return h.Get("webhook-signature")
		case 2:
			return h.Get("X-Hub-Signature-256")
		default:
			return h.Get("X-Signature")
		}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	for kind, cfg := range configs {
		for i := range cfg.Secrets {
			body := []byte(`{"id":"evt_fuzz","n":` + strconv.Itoa(i) + `}`)
			h, err := Sign(cfg, i, "msg_fuzz", now, body)
			if err != nil {
				f.Fatal(err)
			}
			sig := sigOf(kind, h)
			if kind == 1 {
				sig = "v1a,AAAA " + sig
			}
			f.Add(uint8(kind), "msg_fuzz", ts, sig, body)
		}
		// Well-formed deliveries signed with a secret that is not configured, and a correct
		// signature over another body: they reach the signature comparison and must fail it.
		wrong := cfg
		wrong.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("not-configured"))}
		for _, body := range [][]byte{[]byte(`{"id":"evt_fuzz","n":0}`), []byte(`{"id":"evt_other"}`)} {
			h, err := Sign(wrong, 0, "msg_fuzz", now, body)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(kind), "msg_fuzz", ts, sigOf(kind, h), body)
		}
		if h, err := Sign(cfg, 0, "msg_fuzz", now, []byte(`{"id":"evt_fuzz","n":0}`)); err == nil {
			f.Add(uint8(kind), "msg_fuzz", ts, sigOf(kind, h), []byte(`{"id":"evt_fuzz","n":1}`))
		}
		f.Add(uint8(kind), "", "", "", []byte(nil))
		f.Add(uint8(kind), "x", "-1", "v1=,v1,=,,", []byte("{}"))
	}

	f.Fuzz(func(t *testing.T, kind uint8, id, ts, sig string, body []byte) {
		k := int(kind) % len(configs)
		if k == 0 && strings.Contains(ts, ",") {
			// The fuzzed timestamp would spill into further Stripe-Signature items.
			t.Skip()
		}
		cfg := configs[k]
		d, err := Verify(cfg, headers(k, id, ts, sig), body, now)
		if err != nil {
			if d != nil {
				t.Fatalf("Verify returned a Delivery and error %v", err)
			}
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("Verify error %v wraps none of the sentinels", err)
		}

		// Verify accepted: the header must hold the correct signature under some secret.
		var content string
		switch k {
		case 0, 4:
			content = ts + "." + string(body)
		case 1:
			content = id + "." + ts + "." + string(body)
		default:
			content = string(body)
		}
		found := false
		for _, key := range keys(k) {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(content))
			want := m.Sum(nil)
			if k == 1 || k == 4 {
				found = found || strings.Contains(sig, base64.StdEncoding.EncodeToString(want))
			} else {
				found = found || strings.Contains(strings.ToLower(sig), hex.EncodeToString(want))
			}
		}
		if !found {
			t.Fatalf("Verify accepted kind %d, id %q, ts %q, sig %q, body %q without a correct signature", k, id, ts, sig, body)
		}
		if (k == 1 || k == 2) && d.ID != id {
			t.Fatalf("Delivery.ID = %q, want %q", d.ID, id)
		}
		if k == 0 || k == 1 || k == 4 {
			if n, err := strconv.ParseInt(ts, 10, 64); err != nil || d.Timestamp.Unix() != n {
				t.Fatalf("Delivery.Timestamp = %v for ts %q", d.Timestamp, ts)
			}
		}
	})
}
