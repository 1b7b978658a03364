package signature

import (
	"encoding/hex"
	"net/http"
	"strings"
)

const (
	githubSignature       = "X-Hub-Signature-256"
	githubLegacySignature = "X-Hub-Signature"
	githubDelivery        = "X-Github-Delivery" // canonical form of X-GitHub-Delivery
	githubPrefix          = "sha256="
)

// verifyGitHub checks X-Hub-Signature-256: sha256=<hex of HMAC-SHA256(secret, body)>. The
// legacy SHA-1 X-Hub-Signature header is not accepted.
func verifyGitHub(keys [][]byte, h http.Header, body []byte) (*Delivery, error) {
	const op = "verify github"
	v := h.Get(githubSignature)
	if v == "" {
		if h.Get(githubLegacySignature) != "" {
			return nil, newError(ErrMissingSignature, op,
				"X-Hub-Signature-256 header is missing and the legacy SHA-1 X-Hub-Signature is not accepted; the sender must send X-Hub-Signature-256")
		}
		return nil, newError(ErrMissingSignature, op,
			"X-Hub-Signature-256 header is missing; set a secret on the GitHub webhook so that GitHub signs its deliveries")
	}
	enc, ok := strings.CutPrefix(v, githubPrefix)
	if !ok {
		return nil, newError(ErrMalformed, op, "X-Hub-Signature-256 does not start with %q; expected sha256=<hex signature>", githubPrefix)
	}
	sig, ok := decodeHexSig(enc)
	if !ok {
		return nil, newError(ErrMalformed, op, "X-Hub-Signature-256 is not sha256= followed by %d hex digits", 2*sigSize)
	}
	if !matchAny(keys, [][]byte{sig}, body) {
		return nil, newError(ErrBadSignature, op,
			"the signature matches none of the %d configured secrets; the webhook's secret on GitHub must be one of them, and the body must arrive unaltered",
			len(keys))
	}
	return &Delivery{ID: h.Get(githubDelivery)}, nil
}

// signGitHub sets X-Hub-Signature-256, and X-GitHub-Delivery when id is not empty.
func signGitHub(h http.Header, key []byte, id string, body []byte) {
	h.Set(githubSignature, githubPrefix+hex.EncodeToString(mac(key, body)))
	if id != "" {
		h.Set(githubDelivery, id)
	}
}
