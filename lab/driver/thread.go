package driver

import "github.com/gowq/wq/internal/labsys"

// Thread is a locked OS thread that runs functions one at a time: the
// queuing thread of a measurement, pinned and given a class by its setup.
type Thread struct {
	reqs chan func()
}

// StartThread starts a thread (labsys.GoThread: its own, never the main
// thread, destroyed when stopped) and runs setup on it; when setup
// returns an error the thread ends and StartThread returns that error.
// It blocks until setup has returned.
func StartThread(setup func() error) (*Thread, error) {
	t := &Thread{reqs: make(chan func())}
	ready := make(chan error, 1)
	if err := labsys.GoThread(func() {
		if err := setup(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for fn := range t.reqs {
			fn()
		}
	}); err != nil {
		return nil, err
	}
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

// Do runs fn on the thread and blocks until it has returned.
func (t *Thread) Do(fn func()) {
	done := make(chan struct{})
	t.reqs <- func() {
		defer close(done)
		fn()
	}
	<-done
}

// Stop ends the thread after the function it runs, if any. The Thread
// must not be used after.
func (t *Thread) Stop() { close(t.reqs) }
