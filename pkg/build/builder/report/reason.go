package report

import (
	"errors"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/registry"
)

// Reason returns the status reason a Build records for err, a failure of
// a platform's build: the reason a *source.Error carries (FetchSourceFailed,
// InvalidContextDirectory, ManageDockerfileFailed), PullBuilderImageFailed
// for a base image on a registry the cluster blocks, else the one of the
// failed imagebuild stage (a broken Dockerfile: ManageDockerfileFailed; the
// build, including a base image without the platform: DockerBuildFailed;
// the post-commit hook: PostCommitHookFailed; the push:
// PushImageToRegistryFailed; a pushed image recording another platform:
// GenericBuildFailed), else GenericBuildFailed. It returns "" for
// a nil err.
func Reason(err error) buildv1.StatusReason {
	if err == nil {
		return ""
	}
	var srcErr *source.Error
	if errors.As(err, &srcErr) {
		return srcErr.Reason
	}
	var blocked *registry.BlockedError
	if errors.As(err, &blocked) && !blocked.Push {
		return buildv1.StatusReasonPullBuilderImageFailed
	}
	var stageErr *image.StageError
	if errors.As(err, &stageErr) {
		switch stageErr.Stage {
		case image.StageDockerfile:
			return buildv1.StatusReasonManageDockerfileFailed
		case image.StageBuild:
			return buildv1.StatusReasonDockerBuildFailed
		case image.StagePostCommit:
			return buildv1.StatusReasonPostCommitHookFailed
		case image.StagePush:
			return buildv1.StatusReasonPushImageToRegistryFailed
		}
	}
	return buildv1.StatusReasonGenericBuildFailed
}

// PlatformOutput returns what a platform's status entry records about its
// pushed image, read back from the registry: the manifest's digest, media
// type and size, and the platform of the image's config.
func PlatformOutput(img image.Image) *buildv1.BuildStatusPlatformOutput {
	return &buildv1.BuildStatusPlatformOutput{
		ImageDigest:  img.Digest,
		MediaType:    img.MediaType,
		Size:         img.Size,
		OS:           img.Platform.OS,
		Architecture: img.Platform.Architecture,
		Variant:      img.Platform.Variant,
		OSVersion:    img.Platform.OSVersion,
		OSFeatures:   img.Platform.OSFeatures,
	}
}
