package wq

import (
	"log/slog"

	"github.com/gowq/wq/internal/report"
)

// Logging. gowq logs only where no handler takes the message: the default
// panic and error handlers, a tracer's or callback's recovered panic, the
// watchdog's lockup report, Alloc's warning (class fallback), the
// thread-limit reader's warning and the one-time warning of an RT
// worker's long wait for a P. Every such message goes
// to a queue's own logger (WithLogger) when it is about one queue, else to
// the process-wide logger (SetLogger), else to slog.Default() as it is at
// that moment; a message about a queue carries the attribute
// workqueue=<name>, one about a pool pool=<pool>. kthread's messages go
// to the process-wide logger too, except its last-resort line on standard
// error when the logger's handler itself panicked.

// log returns the logger for messages about q (nil q: the process-wide
// logger).
func (q *Workqueue) log() *slog.Logger {
	if q == nil {
		return report.Logger(nil)
	}
	return report.Logger(q.logger)
}

// plog returns the process-wide logger.
func plog() *slog.Logger { return report.Logger(nil) }
