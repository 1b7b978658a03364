package natsqueue

// settingsSchema is the JSON Schema of a queue's nats: block.
const settingsSchema = `{
  "type": "object",
  "required": [
    "stream"
  ],
  "additionalProperties": false,
  "properties": {
    "stream": {
      "type": "string",
      "minLength": 1
    },
    "consumer": {
      "type": "string",
      "description": "The durable consumer's name (default onceflow-WORKFLOW)."
    },
    "subject": {
      "type": "string",
      "description": "Filters the stream's subjects (default: all)."
    },
    "ack_wait": {
      "$ref": "#/$defs/duration"
    }
  }
}`
