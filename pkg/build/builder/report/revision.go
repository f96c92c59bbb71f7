package report

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// maxRecordAttempts bounds the conflicts a record of spec.revision goes
// through: every status write of the Build's other pods and of the
// controller changes its resourceVersion, and each conflict is followed by
// a read that may find the revision recorded.
const maxRecordAttempts = 20

// RecordRevision sets the Build's spec.revision to rev unless it has one,
// and returns the revision the Build has afterwards: rev when this call
// recorded it, or the one recorded before (by another platform's pod, or
// when the Build was created). The write is a merge patch carrying the
// resourceVersion read just before, so that of two pods recording at once
// the second conflicts, reads again and finds the first's revision; the
// Build's own rule (spec.revision is set once) refuses a second value
// anyway. manager is the field manager of the write.
func (c *Client) RecordRevision(ctx context.Context, key types.NamespacedName, manager string, rev *buildv1.SourceRevision) (*buildv1.SourceRevision, error) {
	builds := c.builds.Namespace(key.Namespace)
	recorded, err := backoff.Retry(ctx, func() (*buildv1.SourceRevision, error) {
		b, err := c.Get(ctx, key)
		if err != nil {
			return nil, retryIf(err, retriable(err))
		}
		if b.Spec.Revision != nil {
			return b.Spec.Revision, nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": b.ResourceVersion},
			"spec":     map[string]any{"revision": rev},
		})
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		if _, err := builds.Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: manager}); err != nil {
			return nil, retryIf(err, apierrors.IsConflict(err) || retriable(err))
		}
		return rev, nil
	},
		// 50 ms apart at first, at most 2 s (wait.Backoff's Cap would end
		// the retries at the tenth).
		backoff.WithBackOff(&backoff.ExponentialBackOff{
			InitialInterval: 50 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 1.5, MaxInterval: 2 * time.Second,
		}),
		backoff.WithMaxTries(maxRecordAttempts), backoff.WithMaxElapsedTime(0))
	if err != nil {
		return nil, fmt.Errorf("recording the commit in spec.revision of Build %s: %w", key, err)
	}
	return recorded, nil
}

// Revision reads the Build's spec.revision as it is now (nil when it has
// none).
func (c *Client) Revision(ctx context.Context, key types.NamespacedName) (*buildv1.SourceRevision, error) {
	steps := wait.Backoff{Steps: 6, Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2}
	var rev *buildv1.SourceRevision
	err := retry.OnError(steps, retriable, func() error {
		b, err := c.Get(ctx, key)
		if err != nil {
			return err
		}
		rev = b.Spec.Revision
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading spec.revision of Build %s: %w", key, err)
	}
	return rev, nil
}

// BuildRevisions reads and records one Build's spec.revision for its build
// pod (docker.Revisions).
type BuildRevisions struct {
	Client  *Client
	Key     types.NamespacedName
	Manager string
	// Recorded, when set, says whether the Build records this pod (its
	// UID): Record waits for it, as the archway-build-revision-writers
	// policy admits a pod's write only then.
	Recorded func(*buildv1.Build) bool
}

// Revision reads the Build's spec.revision.
func (r BuildRevisions) Revision(ctx context.Context) (*buildv1.SourceRevision, error) {
	return r.Client.Revision(ctx, r.Key)
}

// Record records rev as the Build's spec.revision unless it has one, and
// returns what it has.
func (r BuildRevisions) Record(ctx context.Context, rev *buildv1.SourceRevision) (*buildv1.SourceRevision, error) {
	if r.Recorded != nil {
		if err := AwaitRecorded(ctx, r.Client, r.Key, r.Recorded); err != nil {
			return nil, err
		}
	}
	return r.Client.RecordRevision(ctx, r.Key, r.Manager, rev)
}

// retryIf marks err permanent unless again says to try once more.
func retryIf(err error, again bool) error {
	if again {
		return err
	}
	return backoff.Permanent(err)
}
