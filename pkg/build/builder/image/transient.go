package image

import (
	"bytes"
	"io"
	"sync"
)

// reexecSealBusy is what containers/storage's re-exec prints when the
// kernel refuses to seal its memfd copy of this binary (F_ADD_SEALS
// returning EBUSY: some page of the copy still had an extra reference,
// from page reclaim or migration, when the kernel gave up waiting). Every
// RUN step re-executes the builder this way; the step then fails with exit
// status 1 before any of the Dockerfile's commands ran. It says nothing
// about the build, so a build that failed with it is built again.
const reexecSealBusy = "sealing memfd copy: Device or resource busy"

// maxBuildAttempts bounds the builds of one platform when re-execs keep
// failing that way.
const maxBuildAttempts = 3

// watchWriter passes writes through to w and notes whether needle went by,
// even split across writes.
type watchWriter struct {
	w      io.Writer
	needle []byte

	mu   sync.Mutex
	tail []byte // the last len(needle)-1 bytes written
	seen bool
}

func newWatchWriter(w io.Writer, needle string) *watchWriter {
	return &watchWriter{w: w, needle: []byte(needle)}
}

func (ww *watchWriter) Write(p []byte) (int, error) {
	ww.mu.Lock()
	if !ww.seen {
		window := append(ww.tail, p...)
		if bytes.Contains(window, ww.needle) {
			ww.seen = true
		}
		keep := min(len(window), len(ww.needle)-1)
		ww.tail = append(ww.tail[:0], window[len(window)-keep:]...)
	}
	ww.mu.Unlock()
	return ww.w.Write(p)
}

// Seen reports whether needle was written since the last Reset.
func (ww *watchWriter) Seen() bool {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	return ww.seen
}

// Reset forgets what was written.
func (ww *watchWriter) Reset() {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	ww.seen, ww.tail = false, ww.tail[:0]
}
