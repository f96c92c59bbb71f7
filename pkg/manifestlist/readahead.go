package manifestlist

import (
	"context"
	"sync"

	"go.podman.io/image/v5/docker/reference"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// ReadFunc reads one entry's child from the repository of output.
type ReadFunc func(ctx context.Context, output string, e Entry) (Child, error)

// ReadAhead reads platforms' images while the others still build, so that
// Assemble, given it in Options.ReadAhead, finds them read: a platform's
// image is read as soon as its status entry says Complete with a digest.
//
// An early read serves Assemble only for the same output, the same
// platform and the same digest, and only when it succeeded: an image is
// read by its digest, never by a tag, so what was read is what the
// platform reported. A platform that reports another digest (its build was
// retried) cancels the read of the old one and starts one of the new; a
// read that failed is done again by Assemble, so every error is the one a
// read at the end gives. At most one read per platform is under way.
type ReadAhead struct {
	ctx    context.Context
	cancel context.CancelFunc
	output string
	read   ReadFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	reads  map[string]*childRead // by platform key
	closed bool
}

// childRead is one entry's read, under way or done.
type childRead struct {
	entry  Entry
	cancel context.CancelFunc
	done   chan struct{}
	child  Child
	err    error
}

// NewReadAhead returns a ReadAhead of output's images whose reads run
// until ctx ends or Close is called.
func NewReadAhead(ctx context.Context, output string, read ReadFunc) *ReadAhead {
	ctx, cancel := context.WithCancel(ctx)
	return &ReadAhead{ctx: ctx, cancel: cancel, output: output, read: read, reads: map[string]*childRead{}}
}

// ReadChild reads the manifest and image config of e's image from the
// repository of output, as Assemble does: a ReadFunc for NewReadAhead.
func ReadChild(ctx context.Context, output string, access registry.Access, e Entry) (Child, error) {
	tagged, err := platform.ParseOutput(output)
	if err != nil {
		return Child{}, &Error{Reason: buildv1.StatusReasonInvalidOutputReference, Err: err}
	}
	repo := reference.TrimNamed(tagged)
	return fetchChild(ctx, access.SystemContext(reference.Domain(repo)), access.CredentialSource(), repo, e)
}

// Start reads e's image unless a read of that digest for its platform has
// started already. It does not wait for the read.
func (a *ReadAhead) Start(e Entry) {
	key := platformKey(e.Platform)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if old, ok := a.reads[key]; ok {
		if old.entry.Digest == e.Digest && old.entry.Platform == e.Platform {
			return
		}
		old.cancel() // the platform reported another image
	}
	ctx, cancel := context.WithCancel(a.ctx)
	r := &childRead{entry: e, cancel: cancel, done: make(chan struct{})}
	a.reads[key] = r
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(r.done)
		defer cancel()
		r.child, r.err = a.read(ctx, a.output, e)
	}()
}

// Stop cancels the read of platform's image, if any, and forgets it: the
// platform's entry no longer says Complete (its build was retried, or it
// failed after all), so what was read is of no use.
func (a *ReadAhead) Stop(p string) {
	key := platformKey(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.reads[key]; ok {
		r.cancel()
		delete(a.reads, key)
	}
}

// Child returns e's child when a read of e's digest for e's platform from
// output's repository was started and succeeds, waiting for it if it is
// under way; false otherwise (none started, another digest, it failed, or
// ctx ended first). The child carries e as its entry.
func (a *ReadAhead) Child(ctx context.Context, output string, e Entry) (Child, bool) {
	if a == nil || output != a.output {
		return Child{}, false
	}
	a.mu.Lock()
	r, ok := a.reads[platformKey(e.Platform)]
	a.mu.Unlock()
	if !ok || r.entry.Digest != e.Digest || r.entry.Platform != e.Platform {
		return Child{}, false
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return Child{}, false
	}
	if r.err != nil {
		return Child{}, false
	}
	c := r.child
	c.Entry = e
	return c, true
}

// Close cancels the reads under way and waits for them to end; Start
// starts none after it.
func (a *ReadAhead) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}
