package onceflowui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/store"
)

// A run's input and its correction are shown as the characters they hold, escaped for
// the page: "Müller & Söhne <GmbH>" reads so (not \u0026 … \u003c), and markup typed into
// a field stays text.
func TestJSONShownAsItsCharacters(t *testing.T) { eachStore(t, testJSONShownAsItsCharacters) }

func testJSONShownAsItsCharacters(t *testing.T, b *bundle) {
	ctx := t.Context()
	payloads := []string{
		`<script>alert("xss")</script>`,
		`"><img src=x onerror=alert(1)>`,
		`</pre><svg onload=alert(2)>`,
		`' onmouseover='alert(3)`,
	}
	input := map[string]any{"customer_id": "c-7001", "phone": "491511", "company": "Müller & Söhne <GmbH>"}
	for i, p := range payloads {
		input[fmt.Sprintf("x%d", i)] = p
	}
	run, err := b.client.Start(ctx, "signup", "evt-7001", input)
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("the run parked", func() bool {
		if _, err := b.client.Work(ctx); err != nil {
			t.Fatal(err)
		}
		it, err := b.client.ReviewGet(ctx, run.ID, "notify")
		return err == nil && it.State == store.StateNeedsReview
	})
	if _, err := b.client.ReviewReplay(ctx, onceflow.ReplayRequest{RunID: run.ID, Step: "notify", Actor: "test",
		MergePatch: []byte(`{"phone": "+491511", "company": "Meier & Co. <AG>", "x9": "<script>alert(9)</script>"}`)}); err != nil {
		t.Fatal(err)
	}
	br := b.browser()
	br.signIn(adminSecret)
	// The run's page shows the first input in the revision's diff, the item's page the
	// corrected input.
	for path, company := range map[string]string{fmt.Sprintf("/ui/runs/%d", run.ID): "Müller &amp; Söhne &lt;GmbH&gt;",
		fmt.Sprintf("/ui/review/%d/notify", run.ID): "Meier &amp; Co. &lt;AG&gt;"} {
		resp, body := br.get(path)
		wantStatus(t, resp, body, http.StatusOK)
		if !strings.Contains(body, company) {
			t.Errorf("%s does not show the company as its characters:\n%s", path, body)
		}
		for _, esc := range []string{`\u0026`, `\u003c`, `\u003e`} {
			if strings.Contains(body, esc) {
				t.Errorf("%s shows %s", path, esc)
			}
		}
		for _, inert := range []string{"<script>alert", "<img src=x", "<svg onload", "onmouseover='alert", "</pre><svg"} {
			if strings.Contains(body, inert) {
				t.Errorf("%s carries %q as markup", path, inert)
			}
		}
	}
	_, body := br.get(fmt.Sprintf("/ui/runs/%d", run.ID))
	// The revision's field diff and its merge patch.
	for _, want := range []string{`&#34;Meier &amp; Co. &lt;AG&gt;&#34;`, `&#34;company&#34;: &#34;Meier &amp; Co. &lt;AG&gt;&#34;`, `&lt;script&gt;alert(9)&lt;/script&gt;`} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %s:\n%s", want, body)
		}
	}
}

// A run of a paused workflow says so, rather than showing steps pending with a next
// attempt in the past.
func TestRunOfPausedWorkflowSaysSo(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	if _, err := b.client.PauseWorkflow(ctx, "signup", "token:ops", "CRM maintenance"); err != nil {
		t.Fatal(err)
	}
	run, err := b.client.Start(ctx, "signup", "evt-paused", map[string]any{"customer_id": "c-8001", "phone": "+4915100008"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Work(ctx); err != nil {
		t.Fatal(err)
	}
	br := b.browser()
	br.signIn(readSecret)
	resp, body := br.get(fmt.Sprintf("/ui/runs/%d", run.ID))
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `id="paused"><strong>Workflow signup is paused</strong>`) || !strings.Contains(body, "<q>CRM maintenance</q>") {
		t.Fatalf("the run of a paused workflow does not say so:\n%s", body)
	}
	// The live region says it too: it is what replaces the page's part while it polls.
	resp, body = br.get(fmt.Sprintf("/ui/runs/%d/live", run.ID))
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `id="paused"`) {
		t.Fatalf("the run's live region does not say the workflow is paused:\n%s", body)
	}
	if _, err := b.client.ResumeWorkflow(ctx, "signup", "token:ops", ""); err != nil {
		t.Fatal(err)
	}
	_, body = br.get(fmt.Sprintf("/ui/runs/%d", run.ID))
	if strings.Contains(body, `id="paused"`) {
		t.Fatalf("the run says paused after the resume:\n%s", body)
	}
}

// The review list shows the destination's answer to the parked attempt, beside the error.
func TestReviewListShowsTheAnswer(t *testing.T) {
	b := setup(t)
	ctx := t.Context()
	err := b.client.Register(onceflow.Workflow{Name: "crm", Steps: []onceflow.Step{{ID: "upsert", EffectKey: "crm:{input.id}",
		Do: func(context.Context, *onceflow.StepContext) (any, error) {
			return nil, &onceflow.StepError{Class: onceflow.Permanent, ResponseStatus: 409, ResponseExcerpt: `{"detail":"duplicate contact <ada@example.org>"}`,
				Err: errors.New("the CRM refused the contact")}
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.client.Start(ctx, "crm", "evt-crm-1", map[string]any{"id": "42"})
	if err != nil {
		t.Fatal(err)
	}
	b.waitFor("the upsert parked", func() bool {
		if _, err := b.client.Work(ctx); err != nil {
			t.Fatal(err)
		}
		it, err := b.client.ReviewGet(ctx, run.ID, "upsert")
		return err == nil && it.State == store.StateNeedsReview
	})
	br := b.browser()
	br.signIn(readSecret)
	resp, body := br.get("/ui/review?workflow=crm")
	wantStatus(t, resp, body, http.StatusOK)
	if !strings.Contains(body, `<pre class="excerpt answer" title="the destination's answer (excerpt)">{&#34;detail&#34;:&#34;duplicate contact &lt;ada@example.org&gt;&#34;}</pre>`) {
		t.Fatalf("the review list does not show the destination's answer:\n%s", body)
	}
}
