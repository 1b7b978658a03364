package flowfile

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/onceflow/onceflow/flowfile/block"
	"github.com/onceflow/onceflow/steps"
	"github.com/onceflow/onceflow/triggers"
)

// Reader reads workflow files against the step kinds of a registry: a step's kind names a
// kind of Kinds, whose block of the step holds its settings.
//
//	kinds, err := stdsteps.New(stdsteps.Options{Env: os.LookupEnv, Store: st})
//	…
//	defs, err := (&flowfile.Reader{Kinds: kinds}).Load("workflows")
//
// Its triggers are read against a registry of trigger kinds (package triggers): each
// top-level block a trigger kind names (webhook:, queue:, schedule:) holds its settings.
//
//	trigs, err := stdtriggers.New()
//	…
//	reader := &flowfile.Reader{Kinds: kinds, Triggers: trigs}
//
// A Reader is safe for concurrent use once its registries no longer change.
type Reader struct {
	// Kinds are the step kinds files may use; nil knows none.
	Kinds *steps.Registry
	// Triggers are the trigger kinds files may use; nil knows none.
	Triggers *triggers.Registry
}

func (r *Reader) kinds() *steps.Registry {
	if r == nil || r.Kinds == nil {
		return steps.NewRegistry()
	}
	return r.Kinds
}

func (r *Reader) triggers() *triggers.Registry {
	if r == nil || r.Triggers == nil {
		return triggers.NewRegistry()
	}
	return r.Triggers
}

// decodeState is what the decoding of one file needs to read its steps' and notify blocks'
// kind settings: the registry, and the shapes of a step and of a notify block with one
// field per kind.
type decodeState struct {
	kinds      []steps.Kind
	alerters   []steps.Alerter
	triggers   []triggers.Kind
	stepWire   reflect.Type
	notifyWire reflect.Type
	fileWire   reflect.Type
	fileHead   int // how many of fileWire's fields are the Definition's own
}

type decodeKey struct{}

// stepHead is a step's own fields that come before the kinds' blocks, in the order they
// are decoded (which decides the problem a file with several decoding errors gets).
type stepHead struct {
	ID          string    `yaml:"id"`
	Kind        string    `yaml:"kind"`
	EffectKey   string    `yaml:"effect_key"`
	Needs       []string  `yaml:"needs"`
	When        string    `yaml:"when"`
	Retry       *RetryDef `yaml:"retry"`
	OnExhausted string    `yaml:"on_exhausted"`
	OnUnknown   string    `yaml:"on_unknown"`
	Retention   string    `yaml:"retention"`
	Timeout     Duration  `yaml:"timeout"`
	Delay       string    `yaml:"delay"`
	NotBefore   string    `yaml:"not_before"`
}

// notifyHead is a notify block's own fields.
type notifyHead struct {
	Off     bool     `yaml:"off"`
	Reasons []string `yaml:"reasons"`
	Window  Duration `yaml:"window"`
}

// rawBlock holds a block's node, decoded later by the kind it belongs to with the decoder
// of the file.
type rawBlock struct {
	node   ast.Node
	decode func(v any) error
}

// nodeOf receives the node a value is decoded from.
type nodeOf struct{ n ast.Node }

func (n *nodeOf) UnmarshalYAML(node ast.Node) error { n.n = node; return nil }

func (b *rawBlock) UnmarshalYAML(_ context.Context, unmarshal func(any) error) error {
	var n nodeOf
	if err := unmarshal(&n); err != nil {
		return err
	}
	b.node, b.decode = n.n, unmarshal
	return nil
}

func (b *rawBlock) settings() block.Settings { return block.New(b.node, "", b.decode) }

var rawBlockType = reflect.TypeFor[*rawBlock]()

func newDecodeState(kinds *steps.Registry, trigs *triggers.Registry) *decodeState {
	st := &decodeState{kinds: kinds.Kinds(), alerters: kinds.Alerters(), triggers: trigs.Kinds()}
	var fields []reflect.StructField
	def := reflect.TypeFor[Definition]()
	for i := range def.NumField() {
		if f := def.Field(i); f.IsExported() && f.Tag.Get("yaml") != "-" {
			fields = append(fields, f)
		}
	}
	st.fileHead = len(fields)
	for i, k := range st.triggers {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Trigger%d", i), Type: rawBlockType,
			Tag: reflect.StructTag(fmt.Sprintf(`yaml:%q`, k.Spec().Block))})
	}
	st.fileWire = reflect.StructOf(fields)
	fields = nil
	head := reflect.TypeFor[stepHead]()
	for i := range head.NumField() {
		fields = append(fields, head.Field(i))
	}
	for i, k := range st.kinds {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Block%d", i), Type: rawBlockType,
			Tag: reflect.StructTag(fmt.Sprintf(`yaml:%q`, k.Spec().BlockName()))})
	}
	fields = append(fields,
		reflect.StructField{Name: "Notify", Type: rawBlockType, Tag: `yaml:"notify"`},
		reflect.StructField{Name: "Limits", Type: rawBlockType, Tag: `yaml:"limits"`})
	st.stepWire = reflect.StructOf(fields)

	fields = nil
	head = reflect.TypeFor[notifyHead]()
	for i := range head.NumField() {
		fields = append(fields, head.Field(i))
	}
	for i, a := range st.alerters {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Channel%d", i), Type: rawBlockType,
			Tag: reflect.StructTag(fmt.Sprintf(`yaml:%q`, a.AlertBlock()))})
	}
	st.notifyWire = reflect.StructOf(fields)
	return st
}

// isUnknownField reports whether err is the decoder's refusal of a field nobody declared,
// which it reports only when no field had an error of its own.
func isUnknownField(err error) bool {
	var u *yaml.UnknownFieldError
	return errors.As(err, &u)
}

// stepBlock is a kind's block a step sets.
type stepBlock struct {
	kind   steps.Kind
	config steps.Config
}

// UnmarshalYAML decodes a step: its own fields, then the block of every registered kind it
// sets (the kind decodes it), then its notify and limits blocks, strictly and with the
// file's decoder. The first decoding error, in that order, is the step's; a field nobody
// declared is refused only when none other has one, as the decoder does.
func (s *StepDef) UnmarshalYAML(ctx context.Context, unmarshal func(any) error) error {
	st, _ := ctx.Value(decodeKey{}).(*decodeState)
	if st == nil {
		return errors.New("flowfile: a step is decoded by a Reader")
	}
	wire := reflect.New(st.stepWire)
	err := unmarshal(wire.Interface())
	w := wire.Elem()
	var head stepHead
	hv := reflect.ValueOf(&head).Elem()
	for i := range hv.NumField() {
		hv.Field(i).Set(w.Field(i))
	}
	*s = StepDef{ID: head.ID, Kind: head.Kind, EffectKey: head.EffectKey, Needs: head.Needs, When: head.When, Retry: head.Retry,
		OnExhausted: head.OnExhausted, OnUnknown: head.OnUnknown, Retention: head.Retention, Timeout: head.Timeout,
		Delay: head.Delay, NotBefore: head.NotBefore}
	if err != nil && !isUnknownField(err) {
		return err
	}
	n := hv.NumField()
	var first error
	for i, k := range st.kinds {
		raw, _ := w.Field(n + i).Interface().(*rawBlock)
		if raw == nil || raw.node == nil {
			continue
		}
		cfg, derr := k.Decode(raw.settings())
		if derr != nil {
			if first == nil {
				first = derr
			}
			continue
		}
		if cfg == nil {
			continue
		}
		s.blocks = append(s.blocks, stepBlock{kind: k, config: cfg})
		if k.Spec().Name == s.Kind && s.Config == nil {
			s.Config = cfg
		}
	}
	if raw, _ := w.Field(n + len(st.kinds)).Interface().(*rawBlock); raw != nil && raw.node != nil {
		nd := &NotifyDef{}
		if derr := raw.decode(nd); derr != nil && first == nil {
			first = derr
		}
		s.Notify = nd
	}
	if raw, _ := w.Field(n + len(st.kinds) + 1).Interface().(*rawBlock); raw != nil && raw.node != nil {
		ld := &LimitDef{}
		if derr := raw.decode(ld); derr != nil && first == nil {
			first = derr
		}
		s.Limits = ld
	}
	if first != nil {
		return first
	}
	return err
}

// UnmarshalYAML decodes a workflow file: its own fields, then the block of every
// registered trigger kind it sets (the kind decodes it), strictly and with the file's
// decoder. The first decoding error, in that order, is the file's; a field nobody declared
// is refused only when none other has one, as the decoder does.
func (d *Definition) UnmarshalYAML(ctx context.Context, unmarshal func(any) error) error {
	st, _ := ctx.Value(decodeKey{}).(*decodeState)
	if st == nil {
		return errors.New("flowfile: a workflow file is decoded by a Reader")
	}
	wire := reflect.New(st.fileWire)
	err := unmarshal(wire.Interface())
	w := wire.Elem()
	dv := reflect.ValueOf(d).Elem()
	for i := range st.fileHead {
		dv.FieldByName(st.fileWire.Field(i).Name).Set(w.Field(i))
	}
	if err != nil && !isUnknownField(err) {
		return err
	}
	var first error
	for i, k := range st.triggers {
		raw, _ := w.Field(st.fileHead + i).Interface().(*rawBlock)
		if raw == nil || raw.node == nil {
			continue
		}
		cfg, derr := k.Decode(raw.settings(), d.Name)
		if derr != nil {
			if first == nil {
				first = derr
			}
			continue
		}
		if cfg != nil {
			d.Triggers = append(d.Triggers, TriggerDef{kind: k, Config: cfg})
		}
	}
	if first != nil {
		return first
	}
	return err
}

// UnmarshalYAML decodes a notify block: its own fields, then each channel, decoded by the
// kind whose notify field it is.
func (n *NotifyDef) UnmarshalYAML(ctx context.Context, unmarshal func(any) error) error {
	st, _ := ctx.Value(decodeKey{}).(*decodeState)
	if st == nil {
		return errors.New("flowfile: a notify block is decoded by a Reader")
	}
	wire := reflect.New(st.notifyWire)
	err := unmarshal(wire.Interface())
	w := wire.Elem()
	var head notifyHead
	hv := reflect.ValueOf(&head).Elem()
	for i := range hv.NumField() {
		hv.Field(i).Set(w.Field(i))
	}
	*n = NotifyDef{Off: head.Off, Reasons: head.Reasons, Window: head.Window}
	if err != nil && !isUnknownField(err) {
		return err
	}
	var first error
	for i, a := range st.alerters {
		raw, _ := w.Field(hv.NumField() + i).Interface().(*rawBlock)
		if raw == nil || raw.node == nil {
			continue
		}
		ch, derr := a.AlertChannel(raw.settings())
		if derr != nil {
			if first == nil {
				first = derr
			}
			continue
		}
		n.Channels = append(n.Channels, ChannelDef{Field: a.AlertBlock(), Kind: a, Channel: ch})
	}
	if first != nil {
		return first
	}
	return err
}
