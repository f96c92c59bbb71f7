package instantiate

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestStartRetriesEveryAttempt: a start whose number is taken conflicts
// after conflict goes on for maxAttempts attempts, not fewer (wait.Backoff
// with a Cap stopped at the tenth, and twenty simultaneous starts of one
// BuildConfig failed on a loaded machine), then gives up saying why.
// Conflicts are injected into the status writes: what is tested is the
// retry loop, the bed's TestConcurrentStartsNumbering the real contention.
func TestStartRetriesEveryAttempt(t *testing.T) {
	defer func(first, limit time.Duration) { firstDelay, maxDelay = first, limit }(firstDelay, maxDelay)
	firstDelay, maxDelay = 50*time.Microsecond, 2*time.Millisecond
	for _, tc := range []struct {
		conflicts int32
		wantErr   string
	}{
		{conflicts: 30},
		{conflicts: maxAttempts - 1},
		{conflicts: maxAttempts, wantErr: "gave up after 100 attempts against concurrent starts"},
	} {
		scheme := runtime.NewScheme()
		if err := buildv1.AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		bc := testBC()
		var writes atomic.Int32
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(bc).WithStatusSubresource(bc).
			WithInterceptorFuncs(interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
					if writes.Add(1) <= tc.conflicts {
						return apierrors.NewConflict(schema.GroupResource{Group: buildv1.GroupVersion.Group, Resource: "buildconfigs"}, obj.GetName(), nil)
					}
					return c.SubResource(sub).Update(ctx, obj, opts...)
				},
			}).Build()
		b, err := NewStarter(c, nil).Start(t.Context(), bc.Namespace, bc.Name, Request{})
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%d conflicts: got %v, want an error saying %q", tc.conflicts, err, tc.wantErr)
			}
			if got := writes.Load(); got != maxAttempts {
				t.Errorf("%d conflicts: %d attempts, want %d", tc.conflicts, got, maxAttempts)
			}
		case err != nil:
			t.Errorf("%d conflicts: %v", tc.conflicts, err)
		case b.Name != "app-1":
			t.Errorf("%d conflicts: started %s, want app-1", tc.conflicts, b.Name)
		}
	}
}
