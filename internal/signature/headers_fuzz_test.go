package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var digitRuns = regexp.MustCompile(`[0-9]+`)

// FuzzVerifyHeaders gives Verify whole header values of any shape for every scheme — the
// signature header, the timestamp and id headers — where FuzzVerify varies only the parts
// of well-formed ones. Verify never panics, every refusal wraps one of the sentinels, and an
// acceptance means a header holds the signature, under a configured secret, of the body
// (with one of the headers' digit runs as the signed timestamp, for the schemes that sign
// one).
func FuzzVerifyHeaders(f *testing.F) {
	secret := "whsec_fuzz_headers"
	swKey := []byte("fuzz-standard-headers")
	configs := []Config{
		{Scheme: Stripe, Secrets: []string{secret}},
		{Scheme: StandardWebhooks, Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString(swKey)}},
		{Scheme: GitHub, Secrets: []string{secret}},
		{Scheme: HMAC, Secrets: []string{secret}, Header: "X-Signature", Prefix: "sha256="},
		{Scheme: HMAC, Secrets: []string{secret}, Header: "X-Signature", Encoding: "base64", TimestampHeader: "X-Timestamp"},
	}
	// The headers each scheme reads: signature, timestamp, id.
	names := [][3]string{
		{"Stripe-Signature", "", ""},
		{"webhook-signature", "webhook-timestamp", "webhook-id"},
		{"X-Hub-Signature-256", "", "X-GitHub-Delivery"},
		{"X-Signature", "", ""},
		{"X-Signature", "X-Timestamp", ""},
	}
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	for kind, cfg := range configs {
		h, err := Sign(cfg, 0, "msg_1", now, body)
		if err != nil {
			f.Fatal(err)
		}
		n := names[kind]
		f.Add(uint8(kind), h.Get(n[0]), h.Get(n[1]), h.Get(n[2]), body)
		f.Add(uint8(kind), h.Get(n[0])+","+h.Get(n[0]), h.Get(n[1])+" ", h.Get(n[2]), body)
		f.Add(uint8(kind), strings.ToUpper(h.Get(n[0])), "0"+h.Get(n[1]), "", body)
		f.Add(uint8(kind), h.Get(n[0]), h.Get(n[1]), h.Get(n[2]), append(append([]byte(nil), body...), ' '))
	}
	f.Add(uint8(0), "t=1700000000,v1=,v1=zz,t=1,,=,v0=00", "", "", []byte("{}"))
	f.Add(uint8(1), "v1,", "-1", "", []byte(""))
	f.Add(uint8(1), "v1,!!!! v2,AAAA v1a,AAAA", "99999999999999999999", "id", []byte("x"))
	f.Add(uint8(2), "sha1=abc", "", "", []byte("x"))
	f.Add(uint8(3), "sha256=", "", "", []byte(nil))
	f.Add(uint8(4), "====", "1e9", "", []byte("x"))

	f.Fuzz(func(t *testing.T, kind uint8, sig, ts, id string, body []byte) {
		k := int(kind) % len(configs)
		n := names[k]
		h := http.Header{}
		for i, v := range []string{sig, ts, id} {
			if n[i] != "" {
				h.Set(n[i], v)
			}
		}
		d, err := Verify(configs[k], h, body, now)
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
		key := []byte(secret)
		if k == 1 {
			key = swKey
		}
		all := strings.Join([]string{sig, ts, id}, "\n")
		var contents []string
		switch k {
		case 0, 1, 4:
			for _, run := range digitRuns.FindAllString(all, -1) {
				if k == 1 {
					contents = append(contents, id+"."+run+"."+string(body))
				} else {
					contents = append(contents, run+"."+string(body))
				}
			}
		default:
			contents = []string{string(body)}
		}
		for _, c := range contents {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(c))
			want := m.Sum(nil)
			if strings.Contains(strings.ToLower(sig), hex.EncodeToString(want)) || strings.Contains(sig, base64.StdEncoding.EncodeToString(want)) {
				return
			}
		}
		t.Fatalf("Verify accepted kind %d with signature %q, timestamp %q, id %q, body %q, none holding a correct signature", k, sig, ts, id, body)
	})
}
