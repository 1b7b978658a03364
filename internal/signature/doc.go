// Package signature authenticates incoming webhook deliveries: it checks the HMAC-SHA256
// signature a provider puts in the request headers, and the delivery's timestamp where the
// provider sends one, before onceflow accepts the delivery and deduplicates on its event id.
//
// # Schemes
//
// Four signing conventions are supported, chosen with [Config.Scheme]:
//
//   - [Stripe]: Stripe-Signature: t=<unix>,v1=<hex>. The signed payload is "{t}.{body}"
//     and the key is the endpoint secret exactly as Stripe shows it ("whsec_…"), as bytes.
//   - [StandardWebhooks]: the Standard Webhooks specification (webhook-id,
//     webhook-timestamp, webhook-signature: "v1,<base64>" entries). The signed content is
//     "{id}.{timestamp}.{body}" and the key is the base64 secret after an optional "whsec_"
//     prefix.
//   - [GitHub]: X-Hub-Signature-256: sha256=<hex of HMAC(secret, body)>. GitHub sends no
//     timestamp; the delivery id comes from X-GitHub-Delivery.
//   - [HMAC]: a generic HMAC-SHA256 of the body in a header of your choosing, hex or base64,
//     with an optional prefix and an optional timestamp header.
//
// # Verifying
//
// Call [Verify] with the raw request body, exactly as received (read it with a size limit,
// such as [net/http.MaxBytesReader], before any JSON decoding: re-encoded JSON does not
// match its signature). On success it returns a [Delivery] with the delivery id and
// timestamp the signed headers carry. Every comparison of signatures is constant-time.
//
// # Key rotation
//
// [Config.Secrets] lists every secret that is currently valid; a delivery passes when any
// signature in it matches any secret. To rotate, put the new secret first and keep the old
// one until the provider has switched, then remove the old one.
//
// # Errors
//
// Verification errors wrap one of four sentinels, so an HTTP layer can map them to a
// status with [errors.Is]; a reasonable mapping is
//
//   - [ErrMissingSignature], [ErrMalformed]: 400 Bad Request (the sender is misconfigured);
//   - [ErrBadSignature], [ErrExpired]: 401 Unauthorized (not authentic, or a replay).
//
// A configuration problem wraps [ErrInvalidConfig] instead, and is the receiver's fault
// (500). Messages say what is wrong and what the sender must fix; they never contain a
// secret or a computed signature.
//
// # Replays
//
// A signature proves who sent a delivery, not that it is the first time it arrives. For the
// schemes with a timestamp a delivery older (or further in the future) than
// [Config.Tolerance] is rejected; within that window, and always for GitHub, which sends no
// timestamp, a replay is stopped only by deduplicating on the event id. GitHub's
// X-GitHub-Delivery header is not covered by the signature, so deduplicate GitHub
// deliveries on something in the body where that matters.
package signature
