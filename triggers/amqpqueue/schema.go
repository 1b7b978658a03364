package amqpqueue

// settingsSchema is the JSON Schema of a queue's amqp: block.
const settingsSchema = `{
  "type": "object",
  "required": [
    "queue"
  ],
  "additionalProperties": false,
  "properties": {
    "queue": {
      "type": "string",
      "minLength": 1
    },
    "prefetch": {
      "type": "integer",
      "minimum": 1
    }
  }
}`
