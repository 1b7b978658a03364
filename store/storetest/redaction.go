package storetest

import (
	"slices"
	"time"

	"github.com/onceflow/onceflow/store"
)

var redactionTests = []subtest{
	{"PutReplacesAndKeeps", testWorkflowRedaction},
}

// A workflow's recorded fields are replaced by a put that names it, kept (with their time)
// by a put of the same fields, and kept by a put that does not name it; an empty list is a
// declaration of its own.
func testWorkflowRedaction(h *harness) {
	put := func(now time.Time, list ...store.WorkflowRedaction) {
		h.t.Helper()
		if err := h.s.WorkflowRedactionPut(h.ctx, list, now); err != nil {
			h.t.Fatalf("WorkflowRedactionPut: %v", err)
		}
	}
	get := func() map[string]store.WorkflowRedaction {
		h.t.Helper()
		list, err := h.s.WorkflowRedactionList(h.ctx)
		if err != nil {
			h.t.Fatalf("WorkflowRedactionList: %v", err)
		}
		m := map[string]store.WorkflowRedaction{}
		for i, wr := range list {
			if i > 0 && list[i-1].Workflow >= wr.Workflow {
				h.t.Errorf("WorkflowRedactionList is not by name: %+v", list)
			}
			m[wr.Workflow] = wr
		}
		return m
	}
	if list := get(); len(list) != 0 {
		h.t.Fatalf("a new store lists %+v", list)
	}
	t1, t2, t3 := at(time.Minute), at(2*time.Minute), at(3*time.Minute)
	put(t1, store.WorkflowRedaction{Workflow: "signup", Fields: []string{"email", "customer.name"}}, store.WorkflowRedaction{Workflow: "orders"})
	got := get()
	if !slices.Equal(got["signup"].Fields, []string{"email", "customer.name"}) || got["orders"].Fields == nil || len(got["orders"].Fields) != 0 || len(got) != 2 {
		h.t.Fatalf("after the first put: %+v", got)
	}
	h.wantTime("signup recorded", got["signup"].UpdatedAt, t1)
	put(t2, store.WorkflowRedaction{Workflow: "signup", Fields: []string{"email", "customer.name"}})
	h.wantTime("signup put again unchanged", get()["signup"].UpdatedAt, t1)
	put(t3, store.WorkflowRedaction{Workflow: "signup", Fields: []string{"phone"}})
	got = get()
	if !slices.Equal(got["signup"].Fields, []string{"phone"}) || len(got) != 2 {
		h.t.Fatalf("after the change: %+v", got)
	}
	h.wantTime("signup changed", got["signup"].UpdatedAt, t3)
	put(t3) // nothing to record
}
