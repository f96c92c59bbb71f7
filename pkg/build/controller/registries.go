package controller

import (
	"context"
	"errors"
	"time"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/pkg/registry"
)

// RegistryConfig is the cluster's registry configuration, the one
// placement inspects images with (a *registries.Store): mirrors, blocked
// and insecure registries.
type RegistryConfig interface {
	Current(ctx context.Context) (*registries.Settings, error)
}

// registryWait bounds a reconcile's wait for the first registry
// configuration; the Build is tried again after it.
const registryWait = 30 * time.Second

// registrySettings returns the current registry configuration, nil when
// the controller has none.
func (r *Reconciler) registrySettings(ctx context.Context) (*registries.Settings, error) {
	if r.Registries == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, registryWait)
	defer cancel()
	return r.Registries.Current(ctx)
}

// RegistriesConf is the registries.conf build pods are handed in
// $ARCHWAY_REGISTRIES_CONF: the registries of s, "" when it has none.
func RegistriesConf(s *registries.Settings) (string, error) {
	if s == nil || len(s.Conf.Conf.Registries) == 0 {
		return "", nil
	}
	data, err := registry.EncodeConf(s.Conf.Conf)
	return string(data), err
}

// RegistryCAs are the per-registry CA bundles of s that build and
// manifest-list pods trust for their pulls and pushes (PodPlan's
// ClusterRegistryCAs); nil when s has none.
func RegistryCAs(s *registries.Settings) map[string][]byte {
	if s == nil {
		return nil
	}
	return s.Conf.RegistryCAs
}

// BlockedFailure fails a Build before any pod when its output, or a base
// image known before any pod (BaseImages), is on a registry s blocks (for
// a base: with no mirror for its kind of reference), by the rule the
// builder applies (registry.CheckBlocked). Nil: nothing is blocked.
func BlockedFailure(b *buildv1.Build, s *registries.Settings) (*Failure, error) {
	if s == nil {
		return nil, nil
	}
	check := func(ref string, push bool) (*registry.BlockedError, error) {
		err := s.CheckBlocked(ref, push)
		var blocked *registry.BlockedError
		if errors.As(err, &blocked) {
			return blocked, nil
		}
		return nil, err
	}
	if to := b.Spec.Output.To; to != nil && to.Kind == "DockerImage" {
		blocked, err := check(to.Name, true)
		if err != nil || blocked != nil {
			return blockedFailure(buildv1.StatusReasonInvalidOutputReference, "spec.output.to: ", blocked), err
		}
	}
	refs, _ := BaseImages(b)
	for _, ref := range refs {
		blocked, err := check(ref, false)
		if err != nil || blocked != nil {
			return blockedFailure(buildv1.StatusReasonPullBuilderImageFailed, "base ", blocked), err
		}
	}
	return nil, nil
}

func blockedFailure(reason buildv1.StatusReason, prefix string, blocked *registry.BlockedError) *Failure {
	if blocked == nil {
		return nil
	}
	return &Failure{Phase: buildv1.BuildPhaseFailed, Reason: reason, Message: prefix + blocked.Error()}
}
