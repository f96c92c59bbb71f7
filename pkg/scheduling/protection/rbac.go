package protection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// Authorization through RBAC. Besides a group's lists, a requester is
// authorized when RBAC grants it the verb "use" on the subresource of
// controlplaneprotections named for the group in lower case (for the
// ControlPlane group: controlplaneprotections/controlplane) in
// scheduling.archway.dev: a ClusterRoleBinding grants it for pods of every
// namespace, a RoleBinding for pods of its own namespace. Every binding
// counts, so a cluster administrator bound to cluster-admin by user name or
// through any group is authorized, which the lists alone cannot see. The
// webhook asks the apiserver with a SubjectAccessReview, only for requests
// the lists leave unauthorized, and keeps each answer for rbacAnswerTTL.
// (Its right to create SubjectAccessReviews is archway-metrics-auth's.)
const (
	// UseVerb is the verb RBAC grants on a group's subresource.
	UseVerb = "use"
	// ProtectionsResource is the resource whose subresources name the groups.
	ProtectionsResource = "controlplaneprotections"
	// rbacAnswerTTL is how long an answer is reused: a binding made or
	// removed takes effect within it.
	rbacAnswerTTL = 10 * time.Second
	// rbacTimeout bounds one SubjectAccessReview.
	rbacTimeout = 3 * time.Second
	// rbacAnswers bounds the answers kept.
	rbacAnswers = 4096
)

// GroupSubresource is the subresource of controlplaneprotections whose use
// RBAC grants for group.
func GroupSubresource(group schedulingv1alpha1.ProtectionGroupName) string {
	return strings.ToLower(string(group))
}

// rbacAuthorizer asks the apiserver whether RBAC (or whatever authorizer
// the cluster runs) grants a requester the use of a group.
type rbacAuthorizer struct {
	client  client.Client
	answers *utilcache.LRUExpireCache
}

func newRBACAuthorizer(c client.Client) *rbacAuthorizer {
	return &rbacAuthorizer{client: c, answers: utilcache.NewLRUExpireCache(rbacAnswers)}
}

// allowed says whether user may put pods of namespace on group's nodes.
// An error leaves the request unauthorized by RBAC (the lists decide).
func (a *rbacAuthorizer) allowed(ctx context.Context, user authenticationv1.UserInfo, namespace string, group schedulingv1alpha1.ProtectionGroupName) (bool, error) {
	key, err := answerKey(user, namespace, group)
	if err != nil {
		return false, err
	}
	if v, ok := a.answers.Get(key); ok {
		return v.(bool), nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace:   namespace,
			Verb:        UseVerb,
			Group:       schedulingv1alpha1.GroupVersion.Group,
			Resource:    ProtectionsResource,
			Subresource: GroupSubresource(group),
			Name:        schedulingv1alpha1.ControlPlaneProtectionName,
		},
	}}
	ctx, cancel := context.WithTimeout(ctx, rbacTimeout)
	defer cancel()
	if err := a.client.Create(ctx, review); err != nil {
		return false, fmt.Errorf("asking the apiserver whether %q may use group %s: %w", user.Username, group, err)
	}
	a.answers.Add(key, review.Status.Allowed, rbacAnswerTTL)
	return review.Status.Allowed, nil
}

// answerKey identifies a question without keeping the requester's extra
// attributes (which may hold tokens' details) in memory as they are.
func answerKey(user authenticationv1.UserInfo, namespace string, group schedulingv1alpha1.ProtectionGroupName) (string, error) {
	b, err := json.Marshal([]any{user.Username, user.UID, user.Groups, user.Extra, namespace, group})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
