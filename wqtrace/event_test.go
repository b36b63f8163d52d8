package wqtrace

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKindString(t *testing.T) {
	want := map[Kind]string{
		QueueWork:    "workqueue_queue_work",
		ActivateWork: "workqueue_activate_work",
		ExecuteStart: "workqueue_execute_start",
		ExecuteEnd:   "workqueue_execute_end",
		0:            "Kind(0)",
		5:            "Kind(5)",
	}
	for k, s := range want {
		if got := k.String(); got != s {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, s)
		}
		back, ok := KindOf(s)
		if ok != k.Valid() || (ok && back != k) {
			t.Errorf("KindOf(%q) = %v, %v", s, back, ok)
		}
	}
	if QueueWork != 1 || ExecuteEnd != 4 {
		t.Fatalf("kind values changed: %d %d", QueueWork, ExecuteEnd)
	}
}
