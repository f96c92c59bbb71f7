package framework

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/archway-build/archway/test/bed"
)

// HandledMark is an annotation a test sets on an object, and controllers
// ignore, to learn when a controller has read the object as it is now.
const HandledMark = "test.archway.dev/handled-mark"

// markSeq numbers the marks of the whole test binary, so that a mark is
// never one an object already has.
var markSeq atomic.Int64

// Marks records the HandledMark values on the objects a controller's
// client read: which state of an object the controller acted on.
type Marks struct {
	mu   sync.Mutex
	seen map[string]bool
}

// NewMarks returns an empty record.
func NewMarks() *Marks { return &Marks{seen: map[string]bool{}} }

// Intercept wraps funcs (a controller's client; nil fields call the
// client) so that every Get records the mark on what it read. Every
// reconcile begins by reading its object.
func (m *Marks) Intercept(funcs interceptor.Funcs) interceptor.Funcs {
	get := funcs.Get
	funcs.Get = func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		var err error
		if get != nil {
			err = get(ctx, cl, key, obj, opts...)
		} else {
			err = cl.Get(ctx, key, obj, opts...)
		}
		if mark := obj.GetAnnotations()[HandledMark]; err == nil && mark != "" {
			m.mu.Lock()
			m.seen[mark] = true
			m.mu.Unlock()
		}
		return err
	}
	return funcs
}

// Saw reports whether the controller has read an object marked mark.
func (m *Marks) Saw(mark string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[mark]
}

// WaitHandled waits until the controller has finished a reconcile of obj
// (its kind, namespace and name) as it is now, so that what that reconcile
// did not do can be checked. It marks obj twice with c: a reconcile that
// read the first mark acted on the object as it is now, and one that read
// the second began after that one ended, as a workqueue reconciles one key
// at a time.
func (m *Marks) WaitHandled(ctx context.Context, c client.Client, obj client.Object) error {
	for range 2 {
		mark := strconv.FormatInt(markSeq.Add(1), 10)
		patch := []byte(`{"metadata":{"annotations":{"` + HandledMark + `":"` + mark + `"}}}`)
		if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
		err := Poll(ctx, bed.DefaultTimeout, func(context.Context) (bool, error) { return m.Saw(mark), nil })
		if err != nil {
			return fmt.Errorf("the controller never reconciled %s marked %s", client.ObjectKeyFromObject(obj), mark)
		}
	}
	return nil
}
