package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gowq/wq/lab/stats"
)

// Job is one fio pass over a file: psync reads of BlockBytes (4 KiB when
// 0), random or sequential, for Runtime, with invalidate=1 so that the
// file's cached pages are dropped before the pass and every read goes
// to the file system.
type Job struct {
	File       string
	Sequential bool
	Runtime    time.Duration
	BlockBytes int
}

// Pass is what one fio pass measured.
type Pass struct {
	Clat    *stats.Samples // every read's completion latency, from fio's clat log (ns)
	Bytes   int64          // bytes read
	Runtime time.Duration  // fio's job runtime
}

// ErrNoFio is returned when fio is not installed.
var ErrNoFio = errors.New("e2e: fio is not installed")

// RunFio runs fio once for j, writing its logs into dir (removed after),
// and returns every read's clat. fio is killed (SIGKILL) when ctx ends,
// and also when this process dies (its parent-death signal), so that no
// orphaned fio keeps a file of a mount open; its job runs as a thread
// (--thread), not as a forked process that the signal would miss. It blocks for the pass, about
// j.Runtime plus 50-100 ms of fio's start.
func RunFio(ctx context.Context, dir string, j Job) (*Pass, error) {
	bin, err := exec.LookPath("fio")
	if err != nil {
		return nil, ErrNoFio
	}
	bs := j.BlockBytes
	if bs == 0 {
		bs = 4096
	}
	rw := "randread"
	if j.Sequential {
		rw = "read"
	}
	logs, err := os.MkdirTemp(dir, "fio-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logs)
	prefix := filepath.Join(logs, "e2e")
	ms := max(j.Runtime.Milliseconds(), 1)
	cmd := exec.CommandContext(ctx, bin, "--name=e2e", "--filename="+j.File, "--rw="+rw,
		"--bs="+strconv.Itoa(bs), "--ioengine=psync", "--invalidate=1", "--direct=0", "--thread",
		"--time_based", fmt.Sprintf("--runtime=%dms", ms),
		"--write_lat_log="+prefix, "--log_avg_msec=0", "--output-format=json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		msg := ""
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return nil, fmt.Errorf("e2e: fio on %s: %w %s", j.File, err, msg)
	}
	var doc struct {
		Jobs []struct {
			Error      int   `json:"error"`
			JobRuntime int64 `json:"job_runtime"` // ms
			Read       struct {
				IOBytes int64 `json:"io_bytes"`
			} `json:"read"`
		} `json:"jobs"`
	}
	// fio may print notes before the JSON document.
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.Jobs) != 1 {
		return nil, fmt.Errorf("e2e: fio output: %v", err)
	}
	if doc.Jobs[0].Error != 0 {
		return nil, fmt.Errorf("e2e: fio on %s: error %d (%s)", j.File, doc.Jobs[0].Error, syscall.Errno(doc.Jobs[0].Error))
	}
	clat, err := readLatLog(prefix + "_clat.1.log")
	if err != nil {
		return nil, err
	}
	return &Pass{Clat: clat, Bytes: doc.Jobs[0].Read.IOBytes, Runtime: time.Duration(doc.Jobs[0].JobRuntime) * time.Millisecond}, nil
}

// readLatLog reads a fio latency log (log_avg_msec=0: one line per I/O,
// "time, value in ns, direction, size, offset[, prio]").
func readLatLog(path string) (*stats.Samples, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("e2e: fio clat log: %w", err)
	}
	defer f.Close()
	s := stats.NewSamples(0)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Split(sc.Text(), ",")
		if len(fl) < 2 {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(fl[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("e2e: fio clat log %s: %q: %w", path, sc.Text(), err)
		}
		s.Add(v)
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("e2e: fio clat log %s is empty", path)
	}
	return s, sc.Err()
}
