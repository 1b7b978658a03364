package signature

import (
	"net/http"
	"strconv"
	"time"
)

// Sign returns the headers with which a sender signs body under cfg's scheme using
// cfg.Secrets[secretIndex], such that [Verify] accepts them. It serves tests and onceflow's
// own demo sender.
//
// id is the message id for Standard Webhooks (required) and the X-GitHub-Delivery value for
// GitHub (optional); the other schemes ignore it. ts is the send time for the schemes that
// sign one, in whole seconds; GitHub and HMAC without TimestampHeader ignore it.
func Sign(cfg Config, secretIndex int, id string, ts time.Time, body []byte) (http.Header, error) {
	keys, err := cfg.keys()
	if err != nil {
		return nil, err
	}
	op := "sign " + cfg.Scheme.String()
	if secretIndex < 0 || secretIndex >= len(keys) {
		return nil, newError(ErrInvalidConfig, op, "secret index %d is out of range; Secrets has %d entries", secretIndex, len(keys))
	}
	timestamped := cfg.Scheme == Stripe || cfg.Scheme == StandardWebhooks ||
		(cfg.Scheme == HMAC && cfg.TimestampHeader != "")
	if timestamped && ts.Unix() < 0 {
		return nil, newError(ErrInvalidConfig, op, "timestamp %v is before 1970; pass the time of sending", ts)
	}
	key := keys[secretIndex]
	t := strconv.FormatInt(ts.Unix(), 10)
	h := make(http.Header)
	switch cfg.Scheme {
	case Stripe:
		signStripe(h, key, t, body)
	case StandardWebhooks:
		if id == "" {
			return nil, newError(ErrInvalidConfig, op, "message id is empty; Standard Webhooks signs it, so pass a unique id such as msg_…")
		}
		signStandard(h, key, id, t, body)
	case GitHub:
		signGitHub(h, key, id, body)
	default: // HMAC
		signHMAC(cfg, h, key, t, body)
	}
	return h, nil
}
