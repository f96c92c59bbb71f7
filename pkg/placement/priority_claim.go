package placement

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// A PodPlacementConfig's priority is unique in its namespace. Checking the
// other configs in a cache cannot hold that: two configs created at the
// same moment both pass. So each priority in use has a claim, a Lease in
// the config's namespace named for the priority, and only the apiserver
// decides who creates it: the validating webhook admits a config only once
// it holds the claim for its priority (created, or taken over from a stale
// holder with the resourceVersion it read, so two takers cannot both win).
//
// A claim goes stale when its holder is gone (deleted, or its create
// never landed) or has moved to another priority. Because an admitted
// request lands in storage a moment after the webhook answers, a claim
// renewed within PriorityClaimGrace is never judged stale from the
// holder's stored state: its holder may be on its way. The deletion of a
// holder is definitive, so the controller deletes a deleted config's
// claims at once and other claims once they are stale.

// Priority claims.
const (
	// priorityClaimPrefix + the priority names a claim.
	priorityClaimPrefix = "archway-ppc-priority-"
	// PriorityClaimLabel marks claim Leases; its value is the priority.
	PriorityClaimLabel = "placement.archway.dev/podplacementconfig-priority"
	// PriorityClaimUIDAnnotation is the UID of the holding config (its
	// name is the Lease's holderIdentity).
	PriorityClaimUIDAnnotation = "placement.archway.dev/holder-uid"
	// PriorityClaimGrace is how long after its last renewal a claim holds
	// whatever its holder's stored state: longer than an admitted request
	// takes to be stored (the apiserver's request timeout is 60 s).
	PriorityClaimGrace = time.Minute
)

// PriorityClaimName names the claim of priority p.
func PriorityClaimName(p int32) string {
	return priorityClaimPrefix + Itoa(p)
}

func Itoa(p int32) string { return strconv.Itoa(int(p)) }

// claimVerdict is what a claim means for a config that wants its priority.
type claimVerdict int

const (
	// claimOurs: the config already holds it.
	claimOurs claimVerdict = iota
	// ClaimHeld: another config holds it, or may be about to.
	ClaimHeld
	// ClaimStale: nobody holds it any more; it may be taken over.
	ClaimStale
)

// JudgeClaim decides what claim means for the config uid wanting
// priority. holder is the stored config the claim names (nil when none of
// that name exists); deleted says the holder's deletion was observed.
func JudgeClaim(claim *coordinationv1.Lease, uid types.UID, priority int32, holder *multiarchv1beta1.PodPlacementConfig, deleted bool, now time.Time, grace time.Duration) claimVerdict {
	holderUID := types.UID(claim.Annotations[PriorityClaimUIDAnnotation])
	switch {
	case holderUID == uid && uid != "":
		return claimOurs
	case deleted:
		return ClaimStale
	case holder != nil && holder.UID != holderUID:
		// The name belongs to another config: the holder's create can no
		// longer land.
		return ClaimStale
	case claim.Spec.RenewTime != nil && now.Sub(claim.Spec.RenewTime.Time) < grace:
		return ClaimHeld
	case holder == nil || holder.DeletionTimestamp != nil || holder.Spec.Priority != priority:
		return ClaimStale
	}
	return ClaimHeld
}

// newClaim is the claim of c's priority held by c.
func newClaim(c *multiarchv1beta1.PodPlacementConfig, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: PriorityClaimName(c.Spec.Priority)}}
	holdClaim(l, c, now)
	return l
}

// holdClaim makes l held by c, renewed now.
func holdClaim(l *coordinationv1.Lease, c *multiarchv1beta1.PodPlacementConfig, now time.Time) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[PriorityClaimLabel] = strconv.Itoa(int(c.Spec.Priority))
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	t := metav1.NewMicroTime(now)
	if l.Spec.AcquireTime == nil || types.UID(l.Annotations[PriorityClaimUIDAnnotation]) != c.UID {
		l.Spec.AcquireTime = &t
	}
	l.Annotations[PriorityClaimUIDAnnotation] = string(c.UID)
	name := c.Name
	l.Spec.HolderIdentity = &name
	l.Spec.RenewTime = &t
}

// PriorityHeldError says which config holds the priority.
type PriorityHeldError struct {
	namespace string
	holder    string
	priority  int32
}

func (e *PriorityHeldError) Error() string {
	return fmt.Sprintf("spec.priority: %s in namespace %s already has priority %d; priorities are unique within a namespace",
		e.holder, e.namespace, e.priority)
}

func errPriorityHeld(c *multiarchv1beta1.PodPlacementConfig, claim *coordinationv1.Lease) error {
	holder := "another PodPlacementConfig"
	if claim.Spec.HolderIdentity != nil {
		holder = "PodPlacementConfig " + *claim.Spec.HolderIdentity
	}
	return &PriorityHeldError{namespace: c.Namespace, holder: holder, priority: c.Spec.Priority}
}

// PriorityClaims takes and reads claims through the apiserver, never a
// cache: a claim is only as good as the read it was judged on.
type PriorityClaims struct {
	Client client.Client // uncached reads and writes
	Grace  time.Duration
	Now    func() time.Time
}

// claimTries bounds the create/update races one claim may lose before the
// request is refused (each lost race means another writer moved on).
const claimTries = 5

// Claim makes c hold the claim of its priority, or says who holds it.
// With dryRun it only judges, writing nothing.
func (p PriorityClaims) Claim(ctx context.Context, c *multiarchv1beta1.PodPlacementConfig, dryRun bool) error {
	key := types.NamespacedName{Namespace: c.Namespace, Name: PriorityClaimName(c.Spec.Priority)}
	for range claimTries {
		existing := &coordinationv1.Lease{}
		err := p.Client.Get(ctx, key, existing)
		switch {
		case apierrors.IsNotFound(err):
			if dryRun {
				return nil
			}
			err := p.Client.Create(ctx, newClaim(c, p.Now()))
			if apierrors.IsAlreadyExists(err) {
				continue // someone claimed it first: judge their claim
			}
			return err
		case err != nil:
			return err
		}
		verdict, err := p.judge(ctx, existing, c)
		if err != nil {
			return err
		}
		if verdict == ClaimHeld {
			return errPriorityHeld(c, existing)
		}
		if dryRun {
			return nil
		}
		// Renew our own claim, or take over a stale one, with the
		// resourceVersion judged: a conflict means someone else wrote it.
		holdClaim(existing, c, p.Now())
		err = p.Client.Update(ctx, existing)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("spec.priority: priority %d of namespace %s is contended; try again", c.Spec.Priority, c.Namespace)
}

// judge reads the claim's holder and judges the claim for c.
func (p PriorityClaims) judge(ctx context.Context, claim *coordinationv1.Lease, c *multiarchv1beta1.PodPlacementConfig) (claimVerdict, error) {
	var holder *multiarchv1beta1.PodPlacementConfig
	if claim.Spec.HolderIdentity != nil && types.UID(claim.Annotations[PriorityClaimUIDAnnotation]) != c.UID {
		h := &multiarchv1beta1.PodPlacementConfig{}
		switch err := p.Client.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: *claim.Spec.HolderIdentity}, h); {
		case err == nil:
			holder = h
		case !apierrors.IsNotFound(err):
			return ClaimHeld, err
		}
	}
	return JudgeClaim(claim, c.UID, c.Spec.Priority, holder, false, p.Now(), p.Grace), nil
}

// ClaimPriority is the priority a claim Lease stands for.
func ClaimPriority(l *coordinationv1.Lease) (int32, bool) {
	s, ok := strings.CutPrefix(l.Name, priorityClaimPrefix)
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseInt(s, 10, 32)
	return int32(p), err == nil && p >= 0 && p <= 255 && Itoa(int32(p)) == s
}
