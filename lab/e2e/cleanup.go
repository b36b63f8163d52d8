package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LoopState is what Cleanup found of one loop device bound to an image
// of a dead session.
type LoopState struct {
	Device   string `json:"device"`  // e.g. /dev/loop3
	Backing  string `json:"backing"` // the image, as the kernel names it
	Released bool   `json:"released"`
	// Autoclear: still bound because it is busy, and set to be
	// released when its last user goes.
	Autoclear bool     `json:"autoclear,omitempty"`
	Holders   []string `json:"holders,omitempty"` // who keeps it busy: "mounted at X", "pid N (comm)"
}

// CleanReport says what Cleanup did.
type CleanReport struct {
	Unmounted []string    `json:"unmounted,omitempty"` // stale mount points unmounted
	Failed    []string    `json:"failed,omitempty"`    // mount points that could not be unmounted, with the error
	Loops     []LoopState `json:"loops,omitempty"`
	Removed   []string    `json:"removed,omitempty"` // dead session directories removed
	Kept      []string    `json:"kept,omitempty"`    // dead session directories kept, with the reason
	// Live are the sessions of other runs still running, left alone:
	// their fio passes and loads share the CPUs with this run's.
	Live []string `json:"live,omitempty"`
}

// Empty reports whether Cleanup found nothing stale and no other live
// run.
func (r CleanReport) Empty() bool {
	return len(r.Unmounted)+len(r.Failed)+len(r.Loops)+len(r.Removed)+len(r.Kept)+len(r.Live) == 0
}

// String describes the report in one line per action; "" when empty.
func (r CleanReport) String() string {
	var b strings.Builder
	for _, m := range r.Unmounted {
		fmt.Fprintf(&b, "unmounted stale %s\n", m)
	}
	for _, m := range r.Failed {
		fmt.Fprintf(&b, "could not unmount %s\n", m)
	}
	for _, l := range r.Loops {
		switch {
		case l.Released:
			fmt.Fprintf(&b, "released %s (%s)\n", l.Device, l.Backing)
		case l.Autoclear:
			fmt.Fprintf(&b, "%s (%s) is busy, NOT released: set to autoclear, it goes when its holder lets go; held by %s\n",
				l.Device, l.Backing, holders(l.Holders))
		default:
			fmt.Fprintf(&b, "%s (%s) is busy and NOT released; held by %s\n", l.Device, l.Backing, holders(l.Holders))
		}
	}
	for _, d := range r.Removed {
		fmt.Fprintf(&b, "removed dead session %s\n", d)
	}
	for _, d := range r.Kept {
		fmt.Fprintf(&b, "kept %s\n", d)
	}
	for _, d := range r.Live {
		fmt.Fprintf(&b, "another e2e run is live (%s): its passes share the CPUs with this run's, the figures measure both\n", d)
	}
	return b.String()
}

func holders(h []string) string {
	if len(h) == 0 {
		return "no process found (an open by the kernel)"
	}
	return strings.Join(h, ", ")
}

// Cleanup finds what runs killed before their Session.Close left under
// base (DefaultBase when ""): it unmounts (forced and lazy, which aborts
// a FUSE connection) every mount under a session directory whose process
// is gone or a zombie, releases the loop devices bound to
// their images (a busy device is set to autoclear and reported with who
// holds it, not claimed released), and removes those directories once
// nothing is mounted under them. Sessions of other live processes are
// left alone and listed in Live (a concurrent run shares the CPUs). It
// blocks up to about 1 s per loop device that does not release at once.
func Cleanup(base string) (CleanReport, error) {
	if base == "" {
		base = DefaultBase
	}
	var r CleanReport
	ents, err := os.ReadDir(base)
	if err != nil {
		if os.IsNotExist(err) {
			return r, nil
		}
		return r, fmt.Errorf("e2e: cleanup: %w", err)
	}
	var dead []string
	for _, e := range ents {
		switch {
		case !e.IsDir():
		case !sessionAlive(e.Name()):
			dead = append(dead, filepath.Join(base, e.Name()))
		case !strings.HasPrefix(e.Name(), strconv.Itoa(os.Getpid())+"-"):
			r.Live = append(r.Live, filepath.Join(base, e.Name()))
		}
	}
	// Also mounts whose session directory is gone from the listing (a
	// removed directory under a lazy mount).
	for _, d := range dead {
		pts := mountsUnder(d)
		// Deepest first.
		slices.SortFunc(pts, func(a, b string) int { return len(b) - len(a) })
		for _, p := range pts {
			if err := unmount(p); err != nil {
				r.Failed = append(r.Failed, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			r.Unmounted = append(r.Unmounted, p)
		}
	}
	for _, l := range loopsUnder(dead) {
		r.Loops = append(r.Loops, releaseLoop(l[0], l[1]))
	}
	for _, d := range dead {
		if left := mountsUnder(d); len(left) > 0 {
			r.Kept = append(r.Kept, fmt.Sprintf("%s: still mounted: %s", d, strings.Join(left, ", ")))
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			r.Kept = append(r.Kept, fmt.Sprintf("%s: %v", d, err))
			continue
		}
		r.Removed = append(r.Removed, d)
	}
	return r, nil
}

// loopsUnder returns [device, backing file] of every loop device whose
// backing file lies under one of dirs.
func loopsUnder(dirs []string) [][2]string {
	var out [][2]string
	ms, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		back := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		for _, d := range dirs {
			if strings.HasPrefix(back, d+"/") {
				dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(m)))
				out = append(out, [2]string{dev, back})
				break
			}
		}
	}
	return out
}

// releaseLoop asks the kernel to release dev (LOOP_CLR_FD). On a busy
// device the kernel only sets autoclear and answers success, so the
// result is read back from sysfs, for up to 1 s, before it is reported.
func releaseLoop(dev, back string) LoopState {
	st := LoopState{Device: dev, Backing: back}
	if fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0)
		unix.Close(fd)
	}
	sys := "/sys/block/" + filepath.Base(dev) + "/loop/"
	for deadline := time.Now().Add(time.Second); ; {
		if _, err := os.Stat(sys + "backing_file"); err != nil {
			st.Released = true
			return st
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b, err := os.ReadFile(sys + "autoclear"); err == nil && strings.TrimSpace(string(b)) == "1" {
		st.Autoclear = true
	}
	st.Holders = loopHolders(dev)
	return st
}

// loopHolders names what keeps dev open: mounts of it and processes
// with it open.
func loopHolders(dev string) []string {
	var out []string
	for _, m := range readMounts() {
		if m.source == dev {
			out = append(out, "mounted at "+m.point)
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if t, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); t == dev {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				out = append(out, fmt.Sprintf("pid %d (%s)", pid, strings.TrimSpace(string(comm))))
				break
			}
		}
	}
	return out
}
