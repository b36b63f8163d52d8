package wqtrace

import (
	"sync"
	"testing"
)

func TestRecorderRing(t *testing.T) {
	r := NewRecorder(4)
	if r.Cap() != 4 || r.Len() != 0 || len(r.Events()) != 0 {
		t.Fatalf("new recorder not empty")
	}
	for i := range 3 {
		r.Trace(&Event{Kind: QueueWork, TimeNs: int64(i)})
	}
	r.Trace(nil)
	r.Trace(&Event{Kind: 9})
	if got := times(r.Events()); got != "012" {
		t.Errorf("events %q", got)
	}
	for i := 3; i < 10; i++ {
		r.Trace(&Event{Kind: ExecuteEnd, TimeNs: int64(i)})
	}
	if got := times(r.Events()); got != "6789" || r.Dropped() != 6 || r.Len() != 4 {
		t.Errorf("after wrap: events %q dropped %d len %d", got, r.Dropped(), r.Len())
	}
	// Events returns a copy.
	evs := r.Events()
	evs[0].TimeNs = 100
	if r.Events()[0].TimeNs != 6 {
		t.Error("Events shares memory with the ring")
	}
	r.Reset()
	if r.Len() != 0 || r.Dropped() != 0 {
		t.Error("Reset did not clear")
	}
	r.Trace(&Event{Kind: QueueWork, TimeNs: 5})
	if got := times(r.Events()); got != "5" {
		t.Errorf("after reset %q", got)
	}
	if NewRecorder(0).Cap() != DefaultRecorderCapacity || NewRecorder(-3).Cap() != DefaultRecorderCapacity {
		t.Error("default capacity not applied")
	}
}

func times(evs []Event) string {
	var s []byte
	for _, e := range evs {
		s = append(s, byte('0'+e.TimeNs))
	}
	return string(s)
}

func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder(1000)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				r.Trace(&Event{Kind: ExecuteStart, TID: g, TimeNs: int64(i)})
				if i%100 == 0 {
					_ = r.Events()
				}
			}
		}()
	}
	wg.Wait()
	if r.Len() != 1000 || r.Dropped() != 1000 {
		t.Errorf("len %d dropped %d", r.Len(), r.Dropped())
	}
	// The ring keeps the newest events in Trace order: per goroutine, the
	// kept events are a consecutive run ending with its last one (499).
	last := map[int]int64{}
	for _, e := range r.Events() {
		if prev, ok := last[e.TID]; ok && e.TimeNs != prev+1 {
			t.Fatalf("tid %d: %d after %d, want consecutive", e.TID, e.TimeNs, prev)
		}
		last[e.TID] = e.TimeNs
	}
	for g, l := range last {
		if l != 499 {
			t.Errorf("goroutine %d: newest kept %d, want 499", g, l)
		}
	}
}
