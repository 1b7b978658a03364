package schedule

// settingsSchema is the JSON Schema of the schedule: block.
const settingsSchema = `{
  "type": "object",
  "required": [
    "cron"
  ],
  "additionalProperties": false,
  "properties": {
    "name": {
      "type": "string",
      "minLength": 1,
      "description": "Default: the workflow's name."
    },
    "cron": {
      "type": "string",
      "minLength": 1,
      "description": "5 fields (an optional leading seconds field) or a descriptor such as @daily, @monthly."
    },
    "timezone": {
      "type": "string",
      "description": "An IANA time zone such as Europe/Berlin (default UTC)."
    },
    "run_key": {
      "$ref": "#/$defs/template",
      "description": "Must read {schedule.time} or {schedule.period} (and an {item.…} field with for_each). Default {schedule.name}:{schedule.time}."
    },
    "catch_up": {
      "enum": [
        "latest",
        "all",
        "none"
      ],
      "description": "Ticks missed while nothing ran: start the latest, all (up to max_catch_up) or none."
    },
    "max_catch_up": {
      "type": "integer",
      "minimum": 1
    },
    "for_each": {
      "type": "object",
      "required": [
        "url"
      ],
      "additionalProperties": false,
      "description": "Start one run per item of a JSON list fetched with GET when the tick fires.",
      "properties": {
        "url": {
          "$ref": "#/$defs/template"
        },
        "headers": {
          "type": "object",
          "additionalProperties": {
            "type": "string"
          }
        },
        "items": {
          "type": "string",
          "description": "Dotted path of the list in the answer."
        },
        "next": {
          "type": "string",
          "description": "Dotted path of the next page's URL."
        },
        "cursor": {
          "type": "string",
          "description": "Dotted path of the next page's cursor."
        },
        "cursor_param": {
          "type": "string",
          "description": "Query parameter carrying the cursor (default cursor)."
        },
        "timeout": {
          "$ref": "#/$defs/duration"
        },
        "retry": {
          "$ref": "#/$defs/retry"
        }
      }
    }
  }
}`
