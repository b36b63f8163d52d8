package report

import (
	"log/slog"
	"sync/atomic"
)

// logger is the process-wide logger of wq and kthread; nil means
// slog.Default() at the time of each message.
var logger atomic.Pointer[slog.Logger]

// SetLogger replaces the process-wide logger; nil restores slog.Default().
func SetLogger(l *slog.Logger) { logger.Store(l) }

// Logger returns local when it is set (a queue's own), else the
// process-wide logger, else slog.Default(). Never nil.
func Logger(local *slog.Logger) *slog.Logger {
	if local != nil {
		return local
	}
	if l := logger.Load(); l != nil {
		return l
	}
	return slog.Default()
}
