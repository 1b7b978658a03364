package webhook

// settingsSchema is the JSON Schema of the webhook: block.
const settingsSchema = `{
  "description": "Serves the workflow at /hooks/{name} for a provider's signed deliveries.",
  "type": "object",
  "required": [
    "name",
    "scheme",
    "secret_env"
  ],
  "additionalProperties": false,
  "properties": {
    "name": {
      "type": "string",
      "pattern": "^[a-z0-9][a-z0-9_-]{0,99}$"
    },
    "scheme": {
      "enum": [
        "stripe",
        "standard-webhooks",
        "standard_webhooks",
        "github",
        "hmac"
      ]
    },
    "secret_env": {
      "description": "Environment variables holding the signing secrets; any one may match (rotation).",
      "type": "array",
      "minItems": 1,
      "items": {
        "type": "string",
        "minLength": 1
      }
    },
    "tolerance": {
      "$ref": "#/$defs/duration",
      "description": "How old a signed timestamp may be (default 5m)."
    },
    "event_id": {
      "$ref": "#/$defs/template",
      "description": "The run key of a delivery, e.g. \"{input.id}\"; default the scheme's delivery id header."
    },
    "event_types": {
      "type": "array",
      "items": {
        "type": "string"
      },
      "description": "Only these event types start runs; others are acknowledged and ignored."
    },
    "event_type_field": {
      "type": "string",
      "description": "The body field holding the event type (default type)."
    },
    "header": {
      "type": "string",
      "description": "hmac: the header carrying the signature."
    },
    "encoding": {
      "enum": [
        "hex",
        "base64"
      ],
      "description": "hmac: how the signature is written (default hex)."
    },
    "prefix": {
      "type": "string",
      "description": "hmac: text before the signature, e.g. sha256=."
    },
    "timestamp_header": {
      "type": "string",
      "description": "hmac: a header carrying the send time in Unix seconds, signed as {timestamp}.{body}."
    }
  }
}`
