package driver

import "context"

// Interleave runs rows in rounds: each round calls step once for every
// row, and the order rotates by one row per round (round r starts with
// row r mod rows). So a change in the machine's load during a run (a
// burner's phase, a background job) falls on every row alike, rather
// than on whichever rows happened to run at that moment.
//
// step(row, round) measures one slice of row and reports whether it did
// anything; a row that is finished (or skipped) returns false. With
// rounds > 0 Interleave runs exactly that many rounds; with rounds <= 0
// it runs until a whole round makes no progress (count-based rows, such
// as `wqlab wake`'s samples). It stops early, before the next step, when
// ctx ends. It blocks for as long as the steps take and returns the
// number of rounds started.
func Interleave(ctx context.Context, rows, rounds int, step func(row, round int) bool) int {
	if rows < 1 {
		return 0
	}
	round := 0
	for ; rounds <= 0 || round < rounds; round++ {
		if ctx.Err() != nil {
			return round
		}
		progressed := false
		for k := range rows {
			if ctx.Err() != nil {
				return round + 1
			}
			if step((k+round)%rows, round) {
				progressed = true
			}
		}
		if !progressed && rounds <= 0 {
			return round + 1
		}
	}
	return round
}
