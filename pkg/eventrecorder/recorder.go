// Package eventrecorder records events.k8s.io/v1 Events from a queue that
// the process drains before it exits, so that no event recorded before a
// SIGTERM is lost.
//
// client-go's broadcaster writes each event from a goroutine of its own
// with the context of the sink, and controller-runtime cancels that context
// as soon as its broadcaster has handed the events on: whatever is still
// being written then fails with "context canceled" (22-36 events lost when
// the placement controller stopped right after releasing a backlog).
// Here every event goes through one bounded queue and a few writers;
// Shutdown closes the queue and waits for the writers to empty it.
package eventrecorder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
	crrecorder "sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Options tune a Provider; zero values take the defaults.
type Options struct {
	// QueueSize is how many events may wait to be written; more are
	// dropped (and counted) rather than block a reconciler. Default 1000.
	QueueSize int
	// Writers write events at once. Default 4.
	Writers int
	// Tries is how often a write failing for a transient reason is tried.
	// Default 3.
	Tries int
}

// Provider hands out recorders sharing one queue and its writers.
type Provider struct {
	client eventsv1client.EventsV1Interface
	scheme *runtime.Scheme
	host   string
	log    logr.Logger
	tries  int

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool
	queue  chan *eventsv1.Event
	done   chan struct{}
	// stop ends the writes still under way when Shutdown's deadline passes.
	ctx  context.Context
	stop context.CancelFunc

	written, dropped, failed atomic.Int64
}

// New starts a Provider writing with config.
func New(config *rest.Config, scheme *runtime.Scheme, log logr.Logger, opts Options) (*Provider, error) {
	client, err := eventsv1client.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("events client: %w", err)
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1000
	}
	if opts.Writers <= 0 {
		opts.Writers = 4
	}
	if opts.Tries <= 0 {
		opts.Tries = 3
	}
	host, _ := os.Hostname()
	p := &Provider{
		client: client, scheme: scheme, host: host, log: log, tries: opts.Tries,
		queue: make(chan *eventsv1.Event, opts.QueueSize), done: make(chan struct{}),
	}
	p.ctx, p.stop = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range opts.Writers {
		wg.Go(p.write)
	}
	go func() { wg.Wait(); close(p.done) }()
	return p, nil
}

// Recorder returns a recorder reporting as controller name.
func (p *Provider) Recorder(name string) crrecorder.EventRecorder {
	return &recorder{p: p, controller: name, instance: name + "-" + p.host}
}

// Shutdown stops taking events and waits until every queued event has been
// written, or until ctx ends (the writes under way are then cancelled).
// It returns how many events were dropped or failed over the Provider's
// life as an error, nil when none.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.queue)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop()
		<-p.done
	}
	p.stop()
	if d, f := p.dropped.Load(), p.failed.Load(); d+f > 0 {
		return fmt.Errorf("events: %d written, %d dropped (queue full or recorded after shutdown), %d failed", p.written.Load(), d, f)
	}
	return nil
}

// Written is how many events reached the apiserver.
func (p *Provider) Written() int64 { return p.written.Load() }

func (p *Provider) enqueue(ev *eventsv1.Event) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.dropped.Add(1)
		p.log.Info("event recorded after shutdown, not written", "reason", ev.Reason, "regarding", ev.Regarding.Name)
		return
	}
	select {
	case p.queue <- ev:
	default:
		p.dropped.Add(1)
		p.log.Info("event queue full, event dropped", "reason", ev.Reason, "regarding", ev.Regarding.Name)
	}
}

func (p *Provider) write() {
	for ev := range p.queue {
		var err error
		for try := range p.tries {
			if try > 0 {
				select {
				case <-time.After(time.Duration(try) * 200 * time.Millisecond):
				case <-p.ctx.Done():
				}
			}
			_, err = p.client.Events(ev.Namespace).Create(p.ctx, ev, metav1.CreateOptions{})
			if err == nil || !retriable(err) || p.ctx.Err() != nil {
				break
			}
		}
		if err != nil {
			p.failed.Add(1)
			p.log.Error(err, "writing an event", "reason", ev.Reason, "regarding", ev.Regarding.Name)
			continue
		}
		p.written.Add(1)
	}
}

// retriable reports whether a write may succeed if tried again.
func retriable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // transport errors
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// recorder is one controller's events.EventRecorder.
type recorder struct {
	p                    *Provider
	controller, instance string
}

// maxNote is the longest note the apiserver takes.
const maxNote = 1024

// Eventf queues an event; it never blocks.
func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.eventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

func (r *recorder) eventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	now := time.Now()
	ref, err := reference.GetReference(r.p.scheme, regarding)
	if err != nil {
		r.p.log.Error(err, "no reference to the object of an event", "reason", reason)
		return
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		relatedRef, _ = reference.GetReference(r.p.scheme, related)
	}
	msg := fmt.Sprintf(note, args...)
	if len(msg) > maxNote {
		msg = msg[:maxNote-3] + "..."
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	r.p.enqueue(&eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()), Namespace: ns, Annotations: annotations},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                msg,
		Type:                eventtype,
	})
}

// AnnotatedEventf is Eventf with annotations on the event.
func (r *recorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.eventf(regarding, related, annotations, eventtype, reason, action, note, args...)
}
