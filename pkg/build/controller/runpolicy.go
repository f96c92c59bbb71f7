package controller

import (
	"context"
	"fmt"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// BuildNumber is a BuildConfig's Build's number (annotation
// openshift.io/build.number); ok is false for a Build made by hand.
func BuildNumber(b *buildv1.Build) (n int64, ok bool) {
	s, found := b.Annotations[buildv1.BuildNumberAnnotation]
	if !found || b.Labels[buildv1.BuildConfigLabel] == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// Queued says whether a Build has not started: New, not cancelled, and the
// controller has neither resolved its platforms nor named its pod.
func Queued(b *buildv1.Build) bool {
	return (b.Status.Phase == buildv1.BuildPhaseNew || b.Status.Phase == "") && !b.Status.Cancelled &&
		len(b.Status.Platforms) == 0 && b.Annotations[buildv1.BuildPodNameAnnotation] == ""
}

// WaitForTurn says whether a Build that has not started must stay New
// because of its BuildConfig's run policy (the Build's label
// openshift.io/build.start-policy, copied from the BuildConfig when the
// Build was made), given the other Builds of that BuildConfig:
//
//   - Parallel, no label, or a Build not numbered by a BuildConfig: never.
//   - Serial: while any earlier Build has not ended, so builds run one at a
//     time in the order of their numbers.
//   - SerialLatestOnly: while an earlier Build has started (not Queued), or
//     while a later Build waits or runs: only the newest queued Build
//     starts; the BuildConfig controller cancels the older ones.
//
// why names the Build waited for; it becomes the queued Build's
// status.message, so that a user sees why the build has not started.
func WaitForTurn(b *buildv1.Build, siblings []buildv1.Build) (wait bool, why string) {
	n, ok := BuildNumber(b)
	if !ok {
		return false, ""
	}
	policy := buildv1.BuildRunPolicy(b.Labels[buildv1.BuildRunPolicyLabel])
	if policy != buildv1.BuildRunPolicySerial && policy != buildv1.BuildRunPolicySerialLatestOnly {
		return false, ""
	}
	for i := range siblings {
		s := &siblings[i]
		m, ok := BuildNumber(s)
		if !ok || m == n || s.Status.Phase.IsTerminal() {
			continue
		}
		switch {
		case m < n && policy == buildv1.BuildRunPolicySerial:
			return true, fmt.Sprintf("Waiting for build %s to end (runPolicy Serial).", s.Name)
		case m < n && !Queued(s):
			return true, fmt.Sprintf("Waiting for build %s to end (runPolicy SerialLatestOnly).", s.Name)
		case m > n && policy == buildv1.BuildRunPolicySerialLatestOnly:
			return true, fmt.Sprintf("Build %s is newer (runPolicy SerialLatestOnly): this build is to be cancelled.", s.Name)
		}
	}
	return false, ""
}

// waitForTurn applies WaitForTurn to a Build not started yet, with its
// siblings from the cache, and returns the queued Build's message ("" when
// it need not wait).
func (r *Reconciler) waitForTurn(ctx context.Context, b *buildv1.Build) (string, error) {
	if _, ok := BuildNumber(b); !ok {
		return "", nil
	}
	var list buildv1.BuildList
	if err := r.Client.List(ctx, &list, client.InNamespace(b.Namespace),
		client.MatchingLabels{buildv1.BuildConfigLabel: b.Labels[buildv1.BuildConfigLabel]}); err != nil {
		return "", fmt.Errorf("listing the builds of the same BuildConfig: %w", err)
	}
	wait, why := WaitForTurn(b, list.Items)
	if !wait {
		return "", nil
	}
	log.FromContext(ctx).V(1).Info("build not started: " + why)
	return why, nil
}

// queuedSiblings maps an event of a Build made from a BuildConfig to the
// Builds of that BuildConfig not started yet, whose turn may have come
// (the Build ended or was deleted) or gone (a newer one was queued).
func (r *Reconciler) queuedSiblings(ctx context.Context, o client.Object) []reconcile.Request {
	bc := o.GetLabels()[buildv1.BuildConfigLabel]
	policy := buildv1.BuildRunPolicy(o.GetLabels()[buildv1.BuildRunPolicyLabel])
	if bc == "" || (policy != buildv1.BuildRunPolicySerial && policy != buildv1.BuildRunPolicySerialLatestOnly) {
		return nil
	}
	var list buildv1.BuildList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{buildv1.BuildConfigLabel: bc}); err != nil {
		log.FromContext(ctx).Error(err, "listing the builds of a BuildConfig", "buildConfig", bc)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		s := &list.Items[i]
		if s.Name == o.GetName() || s.Status.Phase.IsTerminal() {
			continue
		}
		if _, resolved := resolvedPlatforms(s); !resolved {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
		}
	}
	return out
}
