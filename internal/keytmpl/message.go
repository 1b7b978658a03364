package keytmpl

import "fmt"

// Message is a compiled message that a step publishes to a broker: templates for its
// header values and a body tree (CompileTree).
type Message struct {
	Headers map[string]*Template
	Body    any
}

// CompileMessage compiles a message's header values and body; the environment variables
// they read are added to vars. Its errors name the header or "body" that failed.
func CompileMessage(headers map[string]string, body any, vars EnvVars) (Message, error) {
	m := Message{Headers: make(map[string]*Template, len(headers))}
	var err error
	for k, v := range headers {
		if m.Headers[k], err = ParseStep(v, vars); err != nil {
			return Message{}, fmt.Errorf("header %s: %w", k, err)
		}
	}
	if m.Body, err = CompileTree(body, vars); err != nil {
		return Message{}, fmt.Errorf("body: %w", err)
	}
	return m, nil
}

// Render renders the header values and the body (RenderTree) over data.
func (m Message) Render(data map[string]any) (map[string]string, any, error) {
	hs := make(map[string]string, len(m.Headers))
	for k, t := range m.Headers {
		v, err := t.Render(data)
		if err != nil {
			return nil, nil, err
		}
		hs[k] = v
	}
	body, err := RenderTree(m.Body, data)
	if err != nil {
		return nil, nil, err
	}
	return hs, body, nil
}
