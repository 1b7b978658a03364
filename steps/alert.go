package steps

import (
	"encoding/json"

	"github.com/onceflow/onceflow/flowfile/block"
)

// Alerter is a Kind that can also carry failure notifications: a workflow's notify block
// names it by its AlertBlock, and each alert — an onceflow.Alert, the input of the
// channel's run — is sent by a step of the kind.
type Alerter interface {
	Kind
	// AlertBlock is the field of a notify block that configures the channel ("slack",
	// "email").
	AlertBlock() string
	// AlertChannel decodes a notify block's channel settings, strictly, as Decode does.
	AlertChannel(s block.Settings) (Channel, error)
	// AlertSchema is the JSON Schema of the channel's settings, the value of its notify
	// field.
	AlertSchema() json.RawMessage
}

// Channel is a notification channel: a step whose templates read the onceflow.Alert it
// sends ({input.text}, {input.subject}, {input.blocks}).
type Channel struct {
	// Config is the step; its Walk checks the channel's settings, its OnUnknown and
	// Build are the channel's.
	Config Config
	// Label names the channel after what it reaches (an environment variable, an
	// address): its runs belong to the workflow "onceflow.notify-BLOCK.LABEL".
	Label string
	// Identity tells channels apart: two notify blocks with the same identity share one
	// channel. It is hashed into the channel's name where the label is taken or long,
	// and the name is stored with every alert, so it must not change between releases.
	Identity string
}
