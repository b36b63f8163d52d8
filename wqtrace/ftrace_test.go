package wqtrace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

const ktraceDir = "../testdata/ktrace/"

// Lines copied byte for byte from the captures in testdata/ktrace.
var kernelLines = []struct {
	line string
	ev   Event
}{
	{
		"              dd-8067    [000] d..1.   584.326299: workqueue_queue_work: work struct=00000000f2454434 function=blk_mq_run_work_fn workqueue=kblockd req_cpu=256 cpu=0\n",
		Event{Kind: QueueWork, TimeNs: 584_326_299_000, CPU: 0, TID: 8067, Comm: "dd", Work: 0xf2454434,
			Function: "blk_mq_run_work_fn", Workqueue: "kblockd", ReqCPU: WorkCPUUnbound, TargetCPU: 0, Flags: "d..1."},
	},
	{
		"              dd-8274    [001] d..1.   609.360203: workqueue_activate_work: work struct 00000000f2454434 function=blk_mq_run_work_fn \n",
		Event{Kind: ActivateWork, TimeNs: 609_360_203_000, CPU: 1, TID: 8274, Comm: "dd", Work: 0xf2454434,
			Function: "blk_mq_run_work_fn", Flags: "d..1."},
	},
	{
		"    kworker/0:1H-58      [000] .....   584.326310: workqueue_execute_start: work struct 00000000f2454434: function blk_mq_run_work_fn\n",
		Event{Kind: ExecuteStart, TimeNs: 584_326_310_000, CPU: 0, TID: 58, Comm: "kworker/0:1H", Work: 0xf2454434,
			Function: "blk_mq_run_work_fn", Flags: "....."},
	},
	{
		"    kworker/1:0H-24      [001] .....   609.360225: workqueue_execute_end: work struct 00000000f2454434: function blk_mq_run_work_fn\n",
		Event{Kind: ExecuteEnd, TimeNs: 609_360_225_000, CPU: 1, TID: 24, Comm: "kworker/1:0H", Work: 0xf2454434,
			Function: "blk_mq_run_work_fn", Flags: "....."},
	},
	{
		"             fio-8061    [001] d.s2.   609.361693: workqueue_queue_work: work struct=000000005905b554 function=ext4_end_io_rsv_work workqueue=ext4-rsv-conversion req_cpu=256 cpu=-1\n",
		Event{Kind: QueueWork, TimeNs: 609_361_693_000, CPU: 1, TID: 8061, Comm: "fio", Work: 0x5905b554,
			Function: "ext4_end_io_rsv_work", Workqueue: "ext4-rsv-conversion", ReqCPU: 256, TargetCPU: -1, Flags: "d.s2."},
	},
	{
		"          <idle>-0       [001] dNs2.   619.317527: workqueue_activate_work: work struct 000000006ca38a8f function=psi_avgs_work \n",
		Event{Kind: ActivateWork, TimeNs: 619_317_527_000, CPU: 1, TID: 0, Comm: "<idle>", Work: 0x6ca38a8f,
			Function: "psi_avgs_work", Flags: "dNs2."},
	},
}

func TestAppendFtraceKernelLines(t *testing.T) {
	for _, tc := range kernelLines {
		got := string(AppendFtrace(nil, &tc.ev))
		if got != tc.line {
			t.Errorf("AppendFtrace:\n got %q\nwant %q", got, tc.line)
		}
		// Every line above must really be in one of the captures.
		if !captureHasLine(t, strings.TrimSuffix(tc.line, "\n")) {
			t.Errorf("test line not found in the captures: %q", tc.line)
		}
	}
}

var (
	captureOnce  sync.Once
	captureLines map[string]bool
)

func captureHasLine(t *testing.T, line string) bool {
	t.Helper()
	captureOnce.Do(func() {
		captureLines = map[string]bool{}
		for _, name := range []string{"idle-plus-fsync.txt", "fio-cpuio-8x90-plus-fsync.txt"} {
			data, err := os.ReadFile(ktraceDir + name)
			if err != nil {
				t.Fatalf("reading capture: %v", err)
			}
			for _, l := range strings.Split(string(data), "\n") {
				captureLines[l] = true
			}
		}
	})
	return captureLines[line]
}

func TestAppendFtraceDefaults(t *testing.T) {
	ev := Event{Kind: ExecuteStart, TimeNs: 1_500_000_999, CPU: -1, TID: 1234567, Comm: "a-very-long-command-name",
		Work: 0xc000012345, Function: "main.handle"}
	want := "a-very-long-command-name-1234567 [-01] .....     1.500000: workqueue_execute_start: work struct 000000c000012345: function main.handle\n"
	if got := string(AppendFtrace(nil, &ev)); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	ev.TimeNs = -5
	ev.Flags = "bad flags"
	if got := string(AppendFtrace(nil, &ev)); !strings.Contains(got, "[-01] .....     0.000000: ") {
		t.Errorf("negative time/bad flags not normalised: %q", got)
	}
	ev.Kind = 0
	if got := AppendFtrace([]byte("x"), &ev); string(got) != "x" {
		t.Errorf("invalid kind appended %q", got)
	}
	if got := AppendFtrace(nil, nil); len(got) != 0 {
		t.Errorf("nil event appended %q", got)
	}
}

func TestAppendHeaderMatchesKernel(t *testing.T) {
	for name, h := range map[string]Header{
		"idle-plus-fsync.txt":           {Entries: 2876, Written: 2876, CPUs: 2},
		"fio-cpuio-8x90-plus-fsync.txt": {Entries: 2854, Written: 2854, CPUs: 2},
	} {
		data, err := os.ReadFile(ktraceDir + name)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendHeader(nil, h)
		if !bytes.HasPrefix(data, got) {
			t.Errorf("%s: header differs:\n%s\nfile starts:\n%s", name, got, data[:len(got)])
		}
		if n := bytes.Count(got, []byte("\n")); n != 12 {
			t.Errorf("header has %d lines, want 12", n)
		}
	}
}

func TestFtraceWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFtraceWriter(&buf)
	if err := fw.WriteHeader(Header{CPUs: 2}); err != nil {
		t.Fatal(err)
	}
	const goroutines, per = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				fw.Trace(&Event{Kind: Kind(i%4 + 1), TimeNs: int64(i) * 1000, CPU: g, TID: 100 + g,
					Comm: fmt.Sprintf("worker%d", g), Work: uintptr(g<<20 | i), Function: "main.f", Workqueue: "wq"})
			}
		}()
	}
	wg.Wait()
	fw.Trace(&Event{}) // invalid: dropped
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	p := NewParser(&buf)
	p.Strict = true
	perG := map[int]int{}
	for p.Next() {
		ev := p.Event()
		perG[ev.TID-100]++
		if ev.Comm != fmt.Sprintf("worker%d", ev.TID-100) || ev.CPU != ev.TID-100 {
			t.Fatalf("interleaved or corrupt line: %+v", ev)
		}
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	for g := range goroutines {
		if perG[g] != per {
			t.Errorf("goroutine %d: %d lines, want %d", g, perG[g], per)
		}
	}
	if st := p.Stats(); st.Comments != 12 {
		t.Errorf("header comment lines = %d, want 12", st.Comments)
	}
	fw.Trace(&Event{Kind: QueueWork})
	if err := fw.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close = %v, want ErrClosed", err)
	}
	if err := fw.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if err := fw.WriteHeader(Header{}); !errors.Is(err, ErrClosed) {
		t.Errorf("WriteHeader after Close = %v, want ErrClosed", err)
	}
}

type failWriter struct{ n int }

var errDisk = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errDisk
}

func TestFtraceWriterStickyError(t *testing.T) {
	fw := NewFtraceWriter(&failWriter{})
	ev := Event{Kind: ExecuteEnd, Function: strings.Repeat("f", 1000)}
	for range 100 { // > 64 KiB: forces a write
		fw.Trace(&ev)
	}
	if err := fw.Err(); !errors.Is(err, errDisk) {
		t.Fatalf("Err = %v, want disk full", err)
	}
	if err := fw.Flush(); !errors.Is(err, errDisk) {
		t.Errorf("Flush = %v", err)
	}
	if err := fw.Close(); !errors.Is(err, errDisk) {
		t.Errorf("Close = %v", err)
	}
}

// TestCaptureRoundTrip parses every line of both captures and writes it
// again: the kernel's bytes must come back exactly.
func TestCaptureRoundTrip(t *testing.T) {
	for _, name := range []string{"idle-plus-fsync.txt", "fio-cpuio-8x90-plus-fsync.txt"} {
		f, err := os.Open(ktraceDir + name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var n, events int
		for sc.Scan() {
			n++
			line := sc.Text()
			ev, err := ParseLine(line)
			if strings.HasPrefix(line, "#") {
				if !errors.Is(err, ErrNotWorkqueue) {
					t.Errorf("%s:%d: comment: err = %v", name, n, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s:%d: %v", name, n, err)
				continue
			}
			events++
			if got := string(AppendFtrace(nil, &ev)); got != line+"\n" {
				t.Errorf("%s:%d: round trip differs:\n got %q\nwant %q", name, n, got, line+"\n")
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if events < 2800 {
			t.Errorf("%s: only %d events", name, events)
		}
	}
}

func TestAppendFtraceOneLine(t *testing.T) {
	ev := Event{Kind: QueueWork, Comm: "a\nb", Function: "f\r\n", Workqueue: "w\nq"}
	got := string(AppendFtrace(nil, &ev))
	if strings.Count(got, "\n") != 1 || !strings.Contains(got, "a?b-") || !strings.Contains(got, "function=f?? workqueue=w?q ") {
		t.Errorf("newlines not replaced: %q", got)
	}
	if _, err := ParseLine(got); err != nil {
		t.Errorf("sanitised line does not parse: %v", err)
	}
}

// genText draws a string of up to max bytes from chars whose first and last
// bytes are not blanks (the format cannot carry leading or trailing blanks).
func genText(chars string, max int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		n := rapid.IntRange(0, max).Draw(t, "len")
		b := make([]byte, n)
		for i := range b {
			b[i] = chars[rapid.IntRange(0, len(chars)-1).Draw(t, "c")]
		}
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		for len(b) > 0 && b[len(b)-1] == ' ' {
			b = b[:len(b)-1]
		}
		return string(b)
	})
}

func genEvent() *rapid.Generator[Event] {
	return rapid.Custom(func(t *rapid.T) Event {
		ev := Event{
			Kind:     Kind(rapid.IntRange(int(QueueWork), int(ExecuteEnd)).Draw(t, "kind")),
			TimeNs:   rapid.Int64Range(0, 1e14).Draw(t, "time"),
			CPU:      rapid.IntRange(-1, 4095).Draw(t, "cpu"),
			TID:      rapid.IntRange(0, 1<<22).Draw(t, "tid"),
			Comm:     genText(commChars, 15).Draw(t, "comm"),
			Work:     uintptr(rapid.Uint64().Draw(t, "work")),
			Function: genText(nameChars, 40).Draw(t, "function"),
			Flags:    rapid.SampledFrom([]string{"", ".....", "d..1.", "dNs2.", "d...", "X"}).Draw(t, "flags"),
		}
		if len(ev.Comm) > 0 && ev.Comm[0] == '#' {
			ev.Comm = "x" + ev.Comm[1:]
		}
		if ev.Kind == QueueWork {
			ev.Workqueue = genText(nameChars, 24).Draw(t, "wq")
			ev.ReqCPU = rapid.SampledFrom([]int{0, 1, 7, WorkCPUUnbound, 8192}).Draw(t, "req")
			ev.TargetCPU = rapid.IntRange(-1, 8191).Draw(t, "target")
		}
		return ev
	})
}

// carried returns what the ftrace text of ev can carry.
func carried(ev Event) Event {
	ev.TimeNs -= ev.TimeNs % 1000
	if ev.Flags == "" {
		ev.Flags = DefaultFlags
	}
	return ev
}

// TestRoundTripProperty: Parse(FtraceWriter(events)) == events, up to what
// the format carries, and writing the parsed events again gives the same
// bytes.
func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		evs := rapid.SliceOfN(genEvent(), 1, 20).Draw(t, "events")
		var buf bytes.Buffer
		fw := NewFtraceWriter(&buf)
		if rapid.Bool().Draw(t, "header") {
			if err := fw.WriteHeader(Header{Entries: 1, Written: 2, CPUs: 3}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range evs {
			fw.Trace(&evs[i])
		}
		if err := fw.Close(); err != nil {
			t.Fatal(err)
		}
		text := append([]byte(nil), buf.Bytes()...)
		p := NewParser(&buf)
		p.Strict = true
		var got []Event
		for p.Next() {
			got = append(got, p.Event())
		}
		if err := p.Err(); err != nil {
			t.Fatalf("parse: %v\n%s", err, text)
		}
		if len(got) != len(evs) {
			t.Fatalf("parsed %d events, wrote %d\n%s", len(got), len(evs), text)
		}
		var again []byte
		for i := range evs {
			if want := carried(evs[i]); got[i] != want {
				t.Fatalf("event %d:\n got %+v\nwant %+v\nline %q", i, got[i], want, AppendFtrace(nil, &evs[i]))
			}
			again = AppendFtrace(again, &got[i])
		}
		if !bytes.HasSuffix(text, again) {
			t.Fatalf("rewritten text differs:\n%s\n%s", text, again)
		}
	})
}

const (
	// Task names: anything printable but '#' first (a comment) and '\n'.
	commChars = "abkw/:0123456789-_.<>()[] H"
	// Function and workqueue names: symbols, Go names, " [module]"; no '='.
	nameChars = "abcz_.0123456789()*/[]- "
)
