package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/dockerfile"
	"github.com/archway-build/archway/pkg/platform"
)

// BaseInspector reads a base image's platforms from its registry, with the
// credentials of a docker config (the Build's pull secret: its type and
// data; none for anonymous access). The build controller's binary wires
// placement's inspector, cached by digest and credentials.
type BaseInspector interface {
	BasePlatforms(ctx context.Context, ref string, secretType string, secretData []byte) ([]platform.Platform, error)
}

// BaseImages returns the base images a Build pulls for its target
// platforms that are known before any pod starts, and whether they are
// known at all: a Source build's builder image (sourceStrategy.from),
// dockerStrategy.from (a DockerImage), and the FROM images of
// an inline Dockerfile (spec.source.dockerfile) when every one of them is
// written out (no build arg, quote or escape: the controller expands
// nothing). The Dockerfile is read with the builder's model
// (pkg/build/dockerfile): stage names matched exactly, as buildah matches
// them; scratch, FROMs with a --platform of their own (they pull for
// another platform) and the stages the last one does not need (buildah
// skips them) are left out; from replaces the last FROM's image, as the
// builder does. A Dockerfile from the source repository is not known here:
// only from is.
func BaseImages(b *buildv1.Build) ([]string, bool) {
	if ss := b.Spec.Strategy.SourceStrategy; b.Spec.Strategy.Type == buildv1.SourceBuildStrategyType && ss != nil {
		if ss.From.Kind != "DockerImage" || ss.From.Name == "" || strings.Contains(ss.From.Name, "$") {
			return nil, false
		}
		return []string{ss.From.Name}, true
	}
	var from string
	if ds := b.Spec.Strategy.DockerStrategy; ds != nil && ds.From != nil {
		if ds.From.Kind != "DockerImage" || ds.From.Name == "" || strings.Contains(ds.From.Name, "$") {
			return nil, false
		}
		from = ds.From.Name
	}
	var refs []string
	if df := b.Spec.Source.Dockerfile; df != nil && *df != "" {
		parsed, err := dockerfile.Parse([]byte(*df))
		if err != nil {
			return nil, false
		}
		im := parsed.Images(nil, dockerfile.Literal)
		if slices.ContainsFunc(im.Stages, func(s dockerfile.StageImage) bool { return !s.Told }) {
			return nil, false
		}
		bases := im.Bases()
		if last := len(im.Stages) - 1; from != "" && last >= 0 {
			// from replaces the last FROM's image, whatever it named.
			im.Stages[last].FromStage = -1
			bases = slices.DeleteFunc(bases, func(b dockerfile.Base) bool { return b.Stage == last })
			if !im.Stages[last].PlatformFlag {
				bases = append(bases, dockerfile.Base{Ref: from, Stage: last})
			}
			from = ""
		}
		// Only the stages the last one needs are built: buildah skips the
		// others, so their bases are not checked.
		needed := im.Needed(len(im.Stages) - 1)
		for _, base := range bases {
			if needed[base.Stage] && !slices.Contains(refs, base.Ref) {
				refs = append(refs, base.Ref)
			}
		}
	}
	if from != "" {
		refs = append(refs, from)
	}
	return refs, len(refs) > 0
}

// BaseCheck is what inspecting one base image gave: its platforms, or the
// error that kept them unknown.
type BaseCheck struct {
	Image     string
	Platforms []platform.Platform
	Err       error
}

// Preflight is what the base images' platforms decide before any pod.
type Preflight struct {
	// Failure fails the Build: a platform not allowed to fail that a base
	// image lacks.
	Failure *Failure
	// Failed are the platforms a base image lacks, with the message of
	// their entry: they get no pod.
	Failed map[string]string
	// Unchecked says, per base image that could not be inspected, why: the
	// build goes on and each platform's pod checks its base itself.
	Unchecked []string
}

// DecidePreflight compares the target platforms with the base images'
// platforms. A platform a base image lacks (same os and architecture; the
// variant is left to the pod's own check, as registries' indexes often
// omit it) fails the Build at once, naming every missing platform and the
// platforms the image has, unless all such platforms are allowed to fail:
// then those alone fail (each missing platform's entry fails either way).
// A base image that could not be inspected decides nothing.
func DecidePreflight(platforms, mayFail []string, checks []BaseCheck) Preflight {
	var pf Preflight
	missing := map[string][]string{} // platform -> messages
	for _, c := range checks {
		if c.Err != nil {
			pf.Unchecked = append(pf.Unchecked, fmt.Sprintf("base image %s could not be inspected (%v)", c.Image, c.Err))
			continue
		}
		var have []string
		for _, p := range c.Platforms {
			have = append(have, p.OS+"/"+p.Architecture)
		}
		slices.Sort(have)
		have = slices.Compact(have)
		for _, name := range platforms {
			p, err := platform.Parse(name)
			if err != nil {
				continue
			}
			if !slices.Contains(have, p.OS+"/"+p.Architecture) {
				missing[name] = append(missing[name], fmt.Sprintf("base image %s has no %s (it has %s)", c.Image, name, listOrNone(have)))
			}
		}
	}
	var required, all []string
	for _, name := range platforms {
		if _, ok := missing[name]; !ok {
			continue
		}
		all = append(all, name)
		if !allowedToFail(mayFail, name) {
			required = append(required, name)
		}
	}
	for _, name := range all {
		if pf.Failed == nil {
			pf.Failed = map[string]string{}
		}
		pf.Failed[name] = strings.Join(missing[name], "; ") + "."
	}
	if len(required) > 0 {
		var msgs []string
		for _, name := range all {
			msgs = append(msgs, missing[name]...)
		}
		pf.Failure = &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonBaseImagePlatformNotFound,
			Message: fmt.Sprintf("%s; use base images that have %s, or leave %s out of the build's platforms",
				strings.Join(msgs, "; "), strings.Join(all, ", "), strings.Join(all, ", "))}
	}
	return pf
}

func listOrNone(ss []string) string {
	if len(ss) == 0 {
		return "no platform"
	}
	return strings.Join(ss, ", ")
}

// baseInspectionTimeout bounds the inspection of a Build's base images
// before the fan-out: a registry slower than this decides nothing. Each
// image's own inspection is bounded by the inspector (placement's
// inspection.timeout).
const baseInspectionTimeout = 15 * time.Second

// maxBaseImages bounds the base images inspected before the fan-out, as
// placement's inspection.maxImagesPerPod bounds a pod's: a Build with more
// is left to its pods' own checks. baseImageParallelism are inspected at
// once, as placement inspects a pod's.
const (
	maxBaseImages        = 64
	baseImageParallelism = 8
)

// preflight inspects the base images a multi-platform Build's platforms
// pull, when they are known before any pod, with the Build's pull secret
// (dockerStrategy.pullSecret, read from the apiserver by name in the
// Build's namespace: the controller caches no Secret), and decides which
// platforms cannot build. Platforms no node can build are left out. The
// inspections run off the worker (r.checks): until they end it returns
// false, and their end enqueues the Build again.
func (r *Reconciler) preflight(ctx context.Context, b *buildv1.Build, res Resolution) (Preflight, bool, error) {
	if r.Bases == nil {
		return Preflight{}, true, nil
	}
	refs, known := BaseImages(b)
	if !known {
		return Preflight{}, true, nil
	}
	if len(refs) > maxBaseImages {
		return Preflight{Unchecked: []string{fmt.Sprintf("the build names %d base images, more than the %d checked before the pods", len(refs), maxBaseImages)}}, true, nil
	}
	var secretType string
	var secretData []byte
	if ps := b.Spec.Strategy.StrategyPullSecret(); ps != nil {
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: ps.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			// The pods cannot start without it either; they say so.
			return Preflight{Unchecked: []string{fmt.Sprintf("pull secret %q does not exist", ps.Name)}}, true, nil
		case err != nil:
			return Preflight{}, false, fmt.Errorf("reading the pull secret: %w", err)
		}
		secretType = string(secret.Type)
		switch secret.Type {
		case corev1.SecretTypeDockerConfigJson:
			secretData = secret.Data[corev1.DockerConfigJsonKey]
		case corev1.SecretTypeDockercfg:
			secretData = secret.Data[corev1.DockerConfigKey]
		}
	}
	checks, ended := r.checks.result(b, func(ctx context.Context) []BaseCheck {
		return r.inspectBases(ctx, refs, secretType, secretData)
	})
	if !ended {
		return Preflight{}, false, nil
	}
	var platforms []string
	for _, p := range res.Platforms {
		if _, noNode := res.NoNode[p]; !noNode {
			platforms = append(platforms, p)
		}
	}
	return DecidePreflight(platforms, b.Spec.PlatformsAllowedToFail, checks), true, nil
}

// inspectBases reads the platforms of refs, baseImageParallelism at once,
// for baseInspectionTimeout in all.
func (r *Reconciler) inspectBases(ctx context.Context, refs []string, secretType string, secretData []byte) []BaseCheck {
	ctx, cancel := context.WithTimeout(ctx, baseInspectionTimeout)
	defer cancel()
	checks := make([]BaseCheck, len(refs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, baseImageParallelism)
	for i, ref := range refs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			ps, err := r.Bases.BasePlatforms(ctx, ref, secretType, secretData)
			checks[i] = BaseCheck{Image: ref, Platforms: ps, Err: err}
		})
	}
	wg.Wait()
	return checks
}

// ApplyPreflight puts the preflight's decision into the resolution's plan:
// platforms a base image lacks fail (no pod is created for an ended
// entry), the Build fails when one of them must not, and an image that
// could not be inspected gets a warning event.
func ApplyPreflight(plan *Plan, pf Preflight, now metav1.Time) {
	for p, msg := range pf.Failed {
		plan.Entries[p] = EntryUpdate{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonBaseImagePlatformNotFound,
			Message: msg, CompletionTimestamp: &now}
	}
	if f := pf.Failure; f != nil {
		plan.Phase, plan.Reason, plan.Message = f.Phase, f.Reason, f.Message
	}
	for _, u := range pf.Unchecked {
		plan.Events = append(plan.Events, PlanEvent{Type: corev1.EventTypeWarning, Reason: buildv1.EventReasonBaseImageCheckSkipped,
			Message: u + "; each platform's pod checks its base image instead"})
	}
}

// TrustedCAFailure says why a Build with mountTrustedCA cannot run: no
// trusted CA bundle is configured (build.trustedCA), or its ConfigMap
// (cm, nil when it does not exist) lacks the configured key. It returns
// nil when the Build does not set mountTrustedCA or the bundle is there.
func TrustedCAFailure(b *buildv1.Build, ca *configv1alpha1.TrustedCAConfig, cm *corev1.ConfigMap) *Failure {
	if b.Spec.MountTrustedCA == nil || !*b.Spec.MountTrustedCA {
		return nil
	}
	fail := func(msg string) *Failure {
		return &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonMissingTrustedCABundle, Message: msg}
	}
	switch {
	case ca == nil:
		return fail("spec.mountTrustedCA is true, but build-controller's configuration names no trusted CA bundle " +
			"(build.trustedCA): ask the cluster's administrator to set it, or remove mountTrustedCA")
	case cm == nil:
		return fail(fmt.Sprintf("spec.mountTrustedCA is true, but the trusted CA bundle's ConfigMap %q (build.trustedCA) "+
			"does not exist in namespace %s: create it with the key %s holding the PEM bundle "+
			"(on OpenShift, label it config.openshift.io/inject-trusted-cabundle=true), or remove mountTrustedCA",
			ca.ConfigMapName, b.Namespace, ca.Key))
	}
	if _, ok := cm.Data[ca.Key]; !ok {
		if _, ok := cm.BinaryData[ca.Key]; !ok {
			return fail(fmt.Sprintf("spec.mountTrustedCA is true, but ConfigMap %s/%s has no key %s (build.trustedCA.key) "+
				"holding the PEM bundle", b.Namespace, ca.ConfigMapName, ca.Key))
		}
	}
	return nil
}

// trustedCAFailure reads the trusted CA bundle's ConfigMap of a Build with
// mountTrustedCA from the apiserver (the controller caches no ConfigMap)
// and returns TrustedCAFailure's verdict.
func (r *Reconciler) trustedCAFailure(ctx context.Context, b *buildv1.Build) (*Failure, error) {
	ca := r.Config.TrustedCA
	if b.Spec.MountTrustedCA == nil || !*b.Spec.MountTrustedCA || ca == nil {
		return TrustedCAFailure(b, ca, nil), nil
	}
	cm := &corev1.ConfigMap{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: ca.ConfigMapName}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return nil, fmt.Errorf("reading the trusted CA bundle's ConfigMap: %w", err)
	}
	return TrustedCAFailure(b, ca, cm), nil
}
