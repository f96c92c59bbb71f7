package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

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

// prepareSource makes a Source build a Dockerfile build (package s2i): it
// reads the builder image of the target platform, with the pull
// credentials, and writes the build context and Dockerfile from it and the
// fetched source. The strategy's env goes into the Dockerfile (set for
// assemble and in the image, after the source's .s2i/environment), so the
// returned fetched source carries it.
func (d *Run) prepareSource(ctx context.Context, b ImageBuilder, fetched source.Fetched, target platform.Platform,
	env []string, pullAuth registry.AuthFile, workDir string) (source.Fetched, error) {
	ss := d.Build.Spec.Strategy.SourceStrategy
	printf(d.log, "Reading the builder image %s for %s\n", ss.From.Name, target)
	builderImage, err := b.PlatformConfig(ctx, "builder image", ss.From.Name, target, pullAuth)
	if err != nil {
		return source.Fetched{}, &statusError{reason: buildv1.StatusReasonPullBuilderImageFailed, err: err}
	}
	printf(d.log, "Builder image %s\n", builderImage.Reference)
	previous := ""
	if ptr.Deref(ss.Incremental, false) {
		previous = d.previousImage(ctx, b, target, pullAuth)
	}
	dir := filepath.Join(workDir, "s2i")
	if err := os.RemoveAll(dir); err != nil {
		return source.Fetched{}, err
	}
	prepared, err := s2i.Prepare(s2i.Inputs{
		SourceDir:  fetched.ContextDir,
		Dir:        dir,
		Builder:    builderImage,
		ScriptsURL: ss.Scripts,
		Env:        env,

		IncrementalFrom: previous,
	})
	if err != nil {
		return source.Fetched{}, &statusError{reason: buildv1.StatusReasonGenericBuildFailed, err: err}
	}
	printf(d.log, "Assembling as user %s with the scripts of %s\n", prepared.AssembleUser, scriptsOf(ss.Scripts, builderImage))
	fetched.ContextDir, fetched.Dockerfile = prepared.ContextDir, prepared.Dockerfile
	return fetched, nil
}

// previousImage returns the previous image of an incremental build's
// platform, by digest: the child for target of the Build's output (the
// index, which build-controller names in the pod's copy of the Build), or
// the output itself for a build of one platform; read with the pull
// credentials, which the build pulls it with. It returns "" when there is
// none, or it cannot be read: the platform then builds in full, as
// OpenShift's builder does.
func (d *Run) previousImage(ctx context.Context, b ImageBuilder, target platform.Platform, pullAuth registry.AuthFile) string {
	ref := d.Build.Annotations[buildv1.IncrementalFromAnnotation]
	if ref == "" && d.Build.Spec.Output.To != nil {
		ref = d.Build.Spec.Output.To.Name
	}
	if ref == "" {
		printf(d.log, "Incremental build without an output: no previous image, a full build\n")
		return ""
	}
	prev, err := b.PlatformConfig(ctx, "previous image", ref, target, pullAuth)
	if err != nil {
		printf(d.log, "No previous image for %s (%v): a full build\n", target, err)
		return ""
	}
	printf(d.log, "Incremental build: restoring the artifacts of the previous image %s\n", prev.Reference)
	return prev.Reference
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
