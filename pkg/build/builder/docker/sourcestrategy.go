package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.podman.io/image/v5/docker/reference"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/build/builder/s2i"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// buildOptions returns the options of the Build's strategy as the build
// reads them: a Docker strategy's own, or what a Source strategy shares
// with it (env, forcePull, pullSecret, volumes, layerCache); its builder image and
// scripts are the Source build's (prepareSource).
func buildOptions(s buildv1.BuildStrategy) (*buildv1.DockerBuildStrategy, error) {
	switch s.Type {
	case buildv1.DockerBuildStrategyType:
		if s.DockerStrategy == nil {
			return &buildv1.DockerBuildStrategy{}, nil
		}
		return s.DockerStrategy, nil
	case buildv1.SourceBuildStrategyType:
		ss := s.SourceStrategy
		if ss == nil {
			return nil, &statusError{reason: buildv1.StatusReasonGenericBuildFailed, err: fmt.Errorf("strategy Source has no sourceStrategy")}
		}
		return &buildv1.DockerBuildStrategy{Env: ss.Env, ForcePull: ss.ForcePull, PullSecret: ss.PullSecret, Volumes: ss.Volumes,
			LayerCache: ss.LayerCache}, nil
	}
	return nil, &statusError{reason: buildv1.StatusReasonUnsupportedBuildStrategy,
		err: fmt.Errorf("strategy %q is not supported by docker-build: use Docker or Source", s.Type)}
}

// sourceBuild is a Source build made a Dockerfile build.
type sourceBuild struct {
	// fetched is the build context and Dockerfile.
	fetched source.Fetched
	// pullAuth is what the build pulls with: the pull credentials, and for
	// an incremental build's previous image, the push credentials.
	pullAuth registry.AuthFile
	// secrets are the source.secrets the assemble step mounts
	// (image.Request.Secrets).
	secrets []string
}

// prepareSource makes a Source build a Dockerfile build (package s2i): it
// reads the builder image of the target platform, with the pull
// credentials, and writes the build context and Dockerfile from it and the
// fetched source. The strategy's env goes into the Dockerfile (set for
// assemble and in the image, after the source's .s2i/environment), so the
// returned fetched source carries it.
func (d *Run) prepareSource(ctx context.Context, b ImageBuilder, fetched source.Fetched, target platform.Platform,
	env []string, pullAuth, pushAuth registry.AuthFile, workDir string) (sourceBuild, error) {
	ss := d.Build.Spec.Strategy.SourceStrategy
	printf(d.log, "Reading the builder image %s for %s\n", ss.From.Name, target)
	builderImage, err := b.PlatformConfig(ctx, "builder image", ss.From.Name, target, pullAuth)
	if err != nil {
		return sourceBuild{}, &statusError{reason: buildv1.StatusReasonPullBuilderImageFailed, err: err}
	}
	printf(d.log, "Builder image %s\n", builderImage.Reference)
	previous := ""
	if ptr.Deref(ss.Incremental, false) {
		previous, pullAuth = d.previousImage(ctx, b, target, pullAuth, pushAuth, workDir)
	}
	dir := filepath.Join(workDir, "s2i")
	if err := os.RemoveAll(dir); err != nil {
		return sourceBuild{}, err
	}
	prepared, err := s2i.Prepare(s2i.Inputs{
		SourceDir:  fetched.ContextDir,
		Dir:        dir,
		Builder:    builderImage,
		ScriptsURL: ss.Scripts,
		Env:        env,

		IncrementalFrom: previous,
		Secrets:         d.sourceSecrets(),
		ConfigMaps:      d.sourceConfigMaps(),
	})
	if err != nil {
		return sourceBuild{}, &statusError{reason: buildv1.StatusReasonGenericBuildFailed, err: err}
	}
	printf(d.log, "Assembling as user %s with the scripts of %s\n", prepared.AssembleUser, scriptsOf(ss.Scripts, builderImage))
	if len(prepared.SecretFiles) > 0 {
		printf(d.log, "Secrets for assemble, left out of the image: %s\n", strings.Join(prepared.SecretFiles, " "))
	}
	fetched.ContextDir, fetched.Dockerfile = prepared.ContextDir, prepared.Dockerfile
	return sourceBuild{fetched: fetched, pullAuth: pullAuth, secrets: prepared.Secrets}, nil
}

// sourceConfigMaps are the Build's source.configMaps, as the pod has them
// mounted (Options.BuildConfigMapsDir, one directory per ConfigMap).
func (d *Run) sourceConfigMaps() []s2i.Input {
	dir := d.Options.BuildConfigMapsDir
	if dir == "" {
		dir = source.DefaultBuildConfigMapsDir
	}
	var out []s2i.Input
	for _, c := range d.Build.Spec.Source.ConfigMaps {
		out = append(out, s2i.Input{Name: c.ConfigMap.Name, Dir: filepath.Join(dir, c.ConfigMap.Name), DestinationDir: c.DestinationDir})
	}
	return out
}

// sourceSecrets are the Build's source.secrets, as the pod has them
// mounted (Options.BuildSecretsDir, one directory per Secret).
func (d *Run) sourceSecrets() []s2i.Input {
	dir := d.Options.BuildSecretsDir
	if dir == "" {
		dir = source.DefaultBuildSecretsDir
	}
	var out []s2i.Input
	for _, s := range d.Build.Spec.Source.Secrets {
		out = append(out, s2i.Input{Name: s.Secret.Name, Dir: filepath.Join(dir, s.Secret.Name), DestinationDir: s.DestinationDir})
	}
	return out
}

// previousImage returns the previous image of an incremental build's
// platform, by digest: the child for target of the Build's output (the
// index, which build-controller names in the pod's copy of the Build), or
// the output itself for a build of one platform. It lives in the output's
// repository, so it is read, as OpenShift's builder pulls it, with the
// credentials the build pushes with (the push secret, else the service
// account's for the output's registry); with none for that repository,
// with the pull credentials. It returns the credentials the build pulls
// with: pullAuth, with the push credential added for the previous image's
// repository alone. It returns "" when there is no previous image, or it
// cannot be read: the platform then builds in full, as OpenShift's builder
// does.
func (d *Run) previousImage(ctx context.Context, b ImageBuilder, target platform.Platform,
	pullAuth, pushAuth registry.AuthFile, workDir string) (string, registry.AuthFile) {
	ref := d.Build.Annotations[buildv1.IncrementalFromAnnotation]
	if ref == "" && d.Build.Spec.Output.To != nil {
		ref = d.Build.Spec.Output.To.Name
	}
	if ref == "" {
		printf(d.log, "Incremental build without an output: no previous image, a full build\n")
		return "", pullAuth
	}
	auth, err := withPushAuth(ref, pullAuth, pushAuth, workDir)
	if err != nil {
		printf(d.log, "No previous image for %s (%v): a full build\n", target, err)
		return "", pullAuth
	}
	prev, err := b.PlatformConfig(ctx, "previous image", ref, target, auth)
	if err != nil {
		printf(d.log, "No previous image for %s (%v): a full build\n", target, err)
		return "", pullAuth
	}
	printf(d.log, "Incremental build: restoring the artifacts of the previous image %s\n", prev.Reference)
	return prev.Reference, auth
}

// withPushAuth returns pullAuth with pushAuth's credential for ref's
// repository added for that repository alone.
func withPushAuth(ref string, pullAuth, pushAuth registry.AuthFile, workDir string) (registry.AuthFile, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return registry.AuthFile{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	return registry.WithRepositoryAuth(pullAuth, reference.TrimNamed(named), pushAuth, workDir)
}

// scriptsOf says where a Source build's scripts come from, for the log.
func scriptsOf(strategy string, builder image.PlatformImage) string {
	if strategy != "" {
		return strategy
	}
	if u := builder.Config.Labels[s2i.ScriptsURLLabel]; u != "" {
		return u
	}
	return "the builder image (no " + s2i.ScriptsURLLabel + " label: /usr/libexec/s2i)"
}
