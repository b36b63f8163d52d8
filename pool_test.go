package wq_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
)

// As nobody under nice -n 19, Pools() gives the nice the normal pool's
// workers really run at (read back from a worker), with the class's 0 as
// AskedNice. Catches: the live views saying nice 0 for threads at nice 19.
func TestPoolsNiceReadBackWhenNiced(t *testing.T) {
	if os.Getenv("GOWQ_CHILD_POOLNICE") == "1" {
		poolNiceChild(t)
		return
	}
	niceBin, err := exec.LookPath("nice")
	if err != nil {
		t.Skipf("nice not found: %v", err)
	}
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestPoolsNiceReadBackWhenNiced$", "-test.v"}, "GOWQ_CHILD_POOLNICE=1")
	cmd.Args = append([]string{"nice", "-n", "19"}, cmd.Args...)
	cmd.Path = niceBin
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "POOLNICE-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func poolNiceChild(t *testing.T) {
	wq.SetErrorHandler(func(op, fn string, err error) {})
	defer wq.SetErrorHandler(nil)
	q, err := wq.Alloc("poolnice", wq.Unbound, 0, wq.Threads())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	tidc := make(chan int, 1)
	q.Queue(wq.NewWork(func() { tidc <- sched.Gettid() }))
	var tid int
	select {
	case tid = <-tidc:
	case <-time.After(10 * time.Second):
		t.Fatal("item did not run")
	}
	a, err := sched.GetAttr(tid)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for _, id := range q.PoolIDs() {
		ids[id] = true
	}
	seen := false
	for _, p := range wq.Pools() {
		if !ids[p.ID] || len(p.Workers) == 0 {
			continue
		}
		seen = true
		if p.Nice != a.Nice || p.AskedNice != 0 {
			t.Errorf("pool %d: Nice %d AskedNice %d; its worker runs at nice %d, the class asks 0", p.ID, p.Nice, p.AskedNice, a.Nice)
		}
	}
	if !seen {
		t.Fatal("no pool of the queue with a worker in Pools()")
	}
	t.Log("POOLNICE-OK")
	println("POOLNICE-OK")
}
