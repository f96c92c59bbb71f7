package controller

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// CreateError is a pod the apiserver refused for good: the reason its
// platform (or the Build) fails with, and the message. A zero Reason is
// CannotCreateBuildPod.
type CreateError struct {
	Reason  buildv1.StatusReason
	Message string
}

// failure is the reason and message of the platform or Build whose pod
// name could not be created.
func (e CreateError) failure(name string) (buildv1.StatusReason, string) {
	reason := e.Reason
	if reason == "" {
		reason = buildv1.StatusReasonCannotCreateBuildPod
	}
	return reason, fmt.Sprintf("creating pod %s: %s", name, e.Message)
}

// podSecurityRefusal marks the apiserver's PodSecurity admission refusals.
const podSecurityRefusal = "violates PodSecurity"

// RefusedCreate is the CreateError of a pod create the apiserver refused
// for good (invalid, forbidden, bad request): the apiserver's message, and
// for a refusal by the namespace's Pod Security level what to change, since
// its own text names a capability, not a remedy.
func RefusedCreate(namespace string, err error) CreateError {
	msg := err.Error()
	if !apierrors.IsForbidden(err) || !strings.Contains(msg, podSecurityRefusal) {
		return CreateError{Message: msg}
	}
	return CreateError{Reason: buildv1.StatusReasonPodSecurityForbidsBuildPod, Message: msg + ". " +
		"Build pods add SYS_ADMIN (valid only inside their user namespace), which Pod Security baseline and restricted refuse: " +
		"label namespace " + namespace + " pod-security.kubernetes.io/enforce=privileged, " +
		"or have the cluster administrator give kube-apiserver archway's PodSecurity admission configuration " +
		"(manifests/podsecurity/admission-configuration.yaml, --admission-control-config-file), " +
		"which exempts the pods build-controller creates (see docs/admin-guide/build-pod-security.md)"}
}
