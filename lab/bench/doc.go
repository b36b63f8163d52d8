// Package bench holds the benchmarks that compare gowq with the Go pools
// users have today (a channel pool, ants/v2, pond/v2) in one process, so that
// their ratios come from the same run. They live in the lab module so that
// the library's module graph does not carry the peers:
//
//	go test -run '^$' -bench . -benchtime 20000x ./lab/bench
//
// In each benchmark the ants/v2 sub-benchmark runs first; the others
// report their ratio to it (x-ants, p50-x-ants, p99-x-ants).
package bench
