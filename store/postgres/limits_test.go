package postgres_test

import (
	"testing"
	"time"
)

// The slots of a destination are shared by every holder: at most n are taken at once, a
// released one is taken again, and one whose holder vanished frees itself when its hold
// ends. The bucket gives burst tokens, then says how long to wait; DestinationSlow holds
// everyone back.
func TestDestinationGate(t *testing.T) {
	testURL(t)
	s := freshStore(t)
	ctx := t.Context()
	key := "host:api.example"
	var slots []int
	for _, owner := range []string{"p1", "p2"} {
		slot, ok, err := s.DestinationSlotTake(ctx, key, 2, owner, time.Minute)
		if err != nil || !ok {
			t.Fatalf("take by %s: %v %v", owner, ok, err)
		}
		slots = append(slots, slot)
	}
	if slots[0] == slots[1] {
		t.Fatalf("two holders got slot %d", slots[0])
	}
	if _, ok, err := s.DestinationSlotTake(ctx, key, 2, "p3", time.Minute); err != nil || ok {
		t.Fatalf("a third take of 2 slots: %v %v", ok, err)
	}
	if err := s.DestinationSlotRelease(ctx, key, slots[0], "p1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.DestinationSlotTake(ctx, key, 2, "p3", time.Millisecond); err != nil || !ok {
		t.Fatalf("take after a release: %v %v", ok, err)
	}
	// p3's hold of 1 ms ends: its slot is free again without a release.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, ok, err := s.DestinationSlotTake(ctx, key, 2, "p4", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an expired hold never freed its slot")
		}
		time.Sleep(5 * time.Millisecond) // polling an observable condition
	}

	for i := range 2 {
		if wait, err := s.DestinationTokenTake(ctx, key, 1, 2); err != nil || wait != 0 {
			t.Fatalf("token %d of a burst of 2: wait %v, %v", i, wait, err)
		}
	}
	if wait, err := s.DestinationTokenTake(ctx, key, 1, 2); err != nil || wait <= 0 || wait > time.Second {
		t.Fatalf("third token at 1/s: wait %v, %v", wait, err)
	}
	if err := s.DestinationSlow(ctx, "host:slow.example", time.Hour); err != nil {
		t.Fatal(err)
	}
	if wait, err := s.DestinationTokenTake(ctx, "host:slow.example", 0, 1); err != nil || wait < 59*time.Minute {
		t.Fatalf("a destination slowed for an hour: wait %v, %v", wait, err)
	}
}
