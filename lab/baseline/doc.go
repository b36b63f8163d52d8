// Package baseline supplies the Go executors that wqlab compares gowq
// against: the usual ways Go programs run work asynchronously, behind one
// small interface, [Executor].
//
//   - [GoStmt] ("go"): one `go` statement per item. No pool, no limit; the Go
//     scheduler is the only queue.
//   - [ChanPool] ("chan"): a fixed set of goroutines reading a buffered
//     channel, the hand-written pool found in most code bases.
//   - [Ants] ("ants"): github.com/panjf2000/ants/v2 in blocking mode, with
//     its default options otherwise (idle workers expire after 1 s).
//   - [Pond] ("pond"): github.com/alitto/pond/v2 with its defaults (unbounded
//     queue, workers exit when the queue is empty).
//
// None of them has thread priorities, CPU affinity or per-key ordering:
// every item runs on an ordinary goroutine, at the mercy of the Go scheduler
// and of the kernel's fair class. That is the point of the comparison.
//
// # Common behaviour
//
// All executors share these properties, each checked by the tests:
//
//   - exactly once: every item whose Submit returned nil runs exactly once;
//   - draining Close: Close returns after every accepted item has finished
//     and every goroutine the executor started has exited (no leaks);
//   - safe after Close: Submit after (or racing with) Close returns
//     [ErrClosed] and never panics; Close may be called more than once;
//   - panic-proof: a panicking item is recovered and counted (Panics), and
//     the executor keeps running the rest; an item that calls
//     runtime.Goexit ends only its own execution.
//
// The wrappers add only what these properties need: an atomic gate that
// tells Close when no Submit is in flight (two atomic adds per Submit) and,
// for GoStmt and ChanPool, a recover in the goroutine that runs the item.
// Ants and Pond recover panics themselves; the wrappers count them through
// the libraries' own hooks and pass items through unwrapped, as their users
// would. Latency is measured by the lab's scenario runner, not here.
package baseline
