// Package instantiate starts a Build from a BuildConfig: the one way every
// path does it (the BuildConfig controller's ConfigChange trigger, the SCM
// webhooks, kubectl archway start-build). NewBuild is the pure part, the
// Build a BuildConfig and a request make; Starter numbers it and creates
// it.
package instantiate

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// The trigger cause messages OpenShift writes into spec.triggeredBy.
const (
	CauseManual       = "Manually triggered"
	CauseConfigChange = "Build configuration change"
	CauseGitHub       = "GitHub WebHook"
	CauseGitLab       = "GitLab WebHook"
	CauseBitbucket    = "Bitbucket WebHook"
	CauseGeneric      = "Generic WebHook"
	CauseImageChange  = "Image change"
)

// Request is what a start adds to the BuildConfig's template, the shape of
// OpenShift's BuildRequest plus archway's platform lists.
type Request struct {
	// TriggeredBy are the causes recorded in the Build's spec.triggeredBy.
	TriggeredBy []buildv1.BuildTriggerCause
	// Env are set in the strategy's environment, replacing variables of the
	// same name.
	Env []corev1.EnvVar
	// Revision is the source revision (e.g. the pushed commit); it
	// replaces the BuildConfig's.
	Revision *buildv1.SourceRevision
	// From replaces the strategy's base (Docker) or builder (Source) image.
	From *corev1.ObjectReference
	// BuildArgs are set in the Docker strategy's buildArgs, replacing
	// arguments of the same name (OpenShift's
	// DockerStrategyOptions.BuildArgs). Only a Docker build has them:
	// CheckStrategyOptions refuses them for another strategy.
	BuildArgs []corev1.EnvVar
	// NoCache, when set, replaces the Docker strategy's noCache
	// (OpenShift's DockerStrategyOptions.NoCache).
	NoCache *bool
	// Incremental, when set, replaces the Source strategy's incremental
	// (OpenShift's SourceStrategyOptions.Incremental). Only a Source build
	// has it: CheckStrategyOptions refuses it for another strategy.
	Incremental *bool
	// Platforms, when set, replace the BuildConfig's platforms; the
	// BuildConfig's platformsAllowedToFail are then dropped unless
	// PlatformsAllowedToFail is set too, as they name the old list.
	Platforms []string
	// PlatformsAllowedToFail, when set, replace the allowed-to-fail list.
	PlatformsAllowedToFail []string
	// Binary, when set, is the binary input of the Build (the uploaded
	// archive's artifact and asFile): it replaces the BuildConfig's
	// spec.source.binary and makes the source type Binary.
	Binary *buildv1.BinaryBuildSource
	// ImageChangeTriggers, when set, replace the BuildConfig's
	// status.imageChangeTriggers in the same write that takes the Build's
	// number: an image change trigger's record and its Build's number are
	// one step, so a restart never starts the same image's build twice.
	ImageChangeTriggers []buildv1.ImageChangeTriggerStatus
	// LastVersion, when set, makes the start happen only while the
	// BuildConfig's status.lastVersion is this value (else
	// ErrLastVersionMismatch), as OpenShift's BuildRequest.lastVersion:
	// the ConfigChange trigger starts build 1 once, however often it runs.
	LastVersion *int64
}

// overridesPlatforms says whether the request changes the platform lists,
// which the apiserver then validates before a number is taken.
func (r *Request) overridesPlatforms() bool {
	return r.Platforms != nil || r.PlatformsAllowedToFail != nil
}

// Name is the name of a BuildConfig's build number n.
func Name(bc string, n int64) string { return bc + "-" + strconv.FormatInt(n, 10) }

// NewBuild is the Build number n of bc for req, as OpenShift makes it: the
// BuildConfig's spec with the request's changes, its labels plus
// openshift.io/build-config.name, buildconfig and
// openshift.io/build.start-policy, the annotations
// openshift.io/build-config.name and openshift.io/build.number (and the
// BuildConfig's build.openshift.io/emulation, archway's), and the
// BuildConfig as its controlling owner (deleting a BuildConfig deletes its
// builds).
func NewBuild(bc *buildv1.BuildConfig, n int64, req Request) *buildv1.Build {
	labels := map[string]string{}
	for k, v := range bc.Labels {
		labels[k] = v
	}
	labels[buildv1.BuildConfigLabel] = buildv1.LabelValue(bc.Name)
	labels[buildConfigLabelDeprecated] = buildv1.LabelValue(bc.Name)
	labels[buildv1.BuildRunPolicyLabel] = string(runPolicy(bc))
	b := &buildv1.Build{
		TypeMeta: metav1.TypeMeta{APIVersion: buildv1.GroupVersion.String(), Kind: "Build"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(bc.Name, n),
			Namespace: bc.Namespace,
			Labels:    labels,
			Annotations: map[string]string{
				buildv1.BuildConfigAnnotation: bc.Name,
				buildv1.BuildNumberAnnotation: strconv.FormatInt(n, 10),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: buildv1.GroupVersion.String(), Kind: "BuildConfig",
				Name: bc.Name, UID: bc.UID, Controller: ptr.To(true),
			}},
		},
		Spec: buildv1.BuildSpec{CommonSpec: *bc.Spec.CommonSpec.DeepCopy()},
	}
	// archway's emulation choice follows the BuildConfig into its builds.
	if v, ok := bc.Annotations[buildv1.EmulationAnnotation]; ok {
		b.Annotations[buildv1.EmulationAnnotation] = v
	}
	spec := &b.Spec
	spec.TriggeredBy = slices.Clone(req.TriggeredBy)
	if req.Revision != nil {
		spec.Revision = req.Revision.DeepCopy()
	}
	if req.Binary != nil {
		spec.Source.Type = buildv1.BuildSourceBinary
		spec.Source.Binary = req.Binary.DeepCopy()
	}
	if req.Platforms != nil {
		spec.Platforms = slices.Clone(req.Platforms)
		spec.PlatformsAllowedToFail = nil
	}
	if req.PlatformsAllowedToFail != nil {
		spec.PlatformsAllowedToFail = slices.Clone(req.PlatformsAllowedToFail)
	}
	if len(spec.Platforms) == 0 {
		spec.Platforms = nil
	}
	if len(spec.PlatformsAllowedToFail) == 0 {
		spec.PlatformsAllowedToFail = nil
	}
	applyStrategyOptions(spec, req)
	b.Status.Phase = buildv1.BuildPhaseNew
	return b
}

// NewClone is build number n of bc that runs src again, as OpenShift's
// clone (oc start-build --from-build): src's spec (its source, revision,
// strategy and platforms, not the BuildConfig's current ones) with the
// request's changes, named, labelled and owned as NewBuild does, and with
// src's emulation choice.
func NewClone(bc *buildv1.BuildConfig, src *buildv1.Build, n int64, req Request) *buildv1.Build {
	from := bc.DeepCopy()
	from.Spec.CommonSpec = *src.Spec.CommonSpec.DeepCopy()
	delete(from.Annotations, buildv1.EmulationAnnotation)
	if v, ok := src.Annotations[buildv1.EmulationAnnotation]; ok {
		if from.Annotations == nil {
			from.Annotations = map[string]string{}
		}
		from.Annotations[buildv1.EmulationAnnotation] = v
	}
	return NewBuild(from, n, req)
}

// applyStrategyOptions sets the request's env, base image, build args and
// noCache in the strategy.
func applyStrategyOptions(spec *buildv1.BuildSpec, req Request) {
	switch {
	case spec.Strategy.DockerStrategy != nil:
		s := spec.Strategy.DockerStrategy
		s.Env = mergeEnv(s.Env, req.Env)
		if req.From != nil {
			s.From = req.From.DeepCopy()
		}
		s.BuildArgs = mergeEnv(s.BuildArgs, req.BuildArgs)
		if req.NoCache != nil {
			s.NoCache = *req.NoCache
		}
	case spec.Strategy.SourceStrategy != nil:
		s := spec.Strategy.SourceStrategy
		s.Env = mergeEnv(s.Env, req.Env)
		if req.From != nil {
			s.From = *req.From.DeepCopy()
		}
		if req.Incremental != nil {
			s.Incremental = new(bool)
			*s.Incremental = *req.Incremental
		}
	case len(req.Env) > 0 || req.From != nil || len(req.BuildArgs) > 0 || req.NoCache != nil:
		// A Docker strategy without options: the request's options go into
		// a new dockerStrategy.
		s := &buildv1.DockerBuildStrategy{Env: mergeEnv(nil, req.Env), BuildArgs: mergeEnv(nil, req.BuildArgs)}
		if req.From != nil {
			s.From = req.From.DeepCopy()
		}
		if req.NoCache != nil {
			s.NoCache = *req.NoCache
		}
		spec.Strategy.DockerStrategy = s
	}
}

// CheckStrategyOptions refuses options the BuildConfig's strategy does not
// have: build args and noCache belong to the Docker strategy.
func CheckStrategyOptions(strategy buildv1.BuildStrategy, req Request) error {
	if req.Incremental != nil && strategy.Type != buildv1.SourceBuildStrategyType {
		return fmt.Errorf("incremental is an option of the Source strategy, and this build's strategy is %s", strategy.Type)
	}
	if len(req.BuildArgs) == 0 && req.NoCache == nil {
		return nil
	}
	if strategy.Type == buildv1.DockerBuildStrategyType || strategy.DockerStrategy != nil {
		return nil
	}
	return fmt.Errorf("build args and noCache are options of the Docker strategy, and this build's strategy is %s", strategy.Type)
}

// buildConfigLabelDeprecated is OpenShift's older label naming a build's
// BuildConfig, still set for selectors written against it.
const buildConfigLabelDeprecated = "buildconfig"

func runPolicy(bc *buildv1.BuildConfig) buildv1.BuildRunPolicy {
	if bc.Spec.RunPolicy == "" {
		return buildv1.BuildRunPolicySerial
	}
	return bc.Spec.RunPolicy
}

// mergeEnv sets each of add in env, replacing a variable of the same name
// in place and appending new ones in order.
func mergeEnv(env, add []corev1.EnvVar) []corev1.EnvVar {
	out := slices.Clone(env)
	for _, e := range add {
		if i := slices.IndexFunc(out, func(o corev1.EnvVar) bool { return o.Name == e.Name }); i >= 0 {
			out[i] = e
		} else {
			out = append(out, e)
		}
	}
	return out
}
