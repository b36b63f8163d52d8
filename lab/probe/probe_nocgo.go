//go:build !cgo

package probe

// Available reports whether the probe can run in this build: ErrUnavailable,
// because the probe is C code and this build has no cgo.
func Available() error { return ErrUnavailable }

// Run checks opts like the cgo build does, then returns ErrUnavailable: a
// build without cgo has no probe threads. It never blocks.
func Run(opts Options) ([]int64, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return nil, ErrUnavailable
}
