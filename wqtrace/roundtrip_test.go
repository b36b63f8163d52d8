package wqtrace

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

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

const (
	// Task names: anything printable but '#' first (a comment) and '\n'.
	commChars = "abkw/:0123456789-_.<>()[] H"
	// Function and workqueue names: symbols, Go names, " [module]"; no '='.
	nameChars = "abcz_.0123456789()*/[]- "
)

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
