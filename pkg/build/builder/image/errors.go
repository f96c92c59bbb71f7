package image

import (
	"fmt"
	"strings"
)

// Stage names the part of a platform's build that failed; callers map it to
// the reason a Build's status records.
type Stage string

// The stages a StageError can name.
const (
	// StageDockerfile is reading and preparing the Dockerfile.
	StageDockerfile Stage = "Dockerfile"
	// StageBuild is the build itself, including pulling base images.
	StageBuild Stage = "Build"
	// StagePostCommit is the post-commit hook, run in the built image.
	StagePostCommit Stage = "PostCommit"
	// StagePush is pushing the built image.
	StagePush Stage = "Push"
	// StageInspect is reading the pushed image back from the registry.
	StageInspect Stage = "Inspect"
)

// StageError is a failure of one stage of a platform's build.
type StageError struct {
	Stage Stage
	Err   error
}

func (e *StageError) Error() string {
	switch e.Stage {
	case StageDockerfile:
		return "preparing the Dockerfile: " + e.Err.Error()
	case StageBuild:
		return "building: " + e.Err.Error()
	case StagePostCommit:
		return e.Err.Error()
	case StagePush:
		return "pushing: " + e.Err.Error()
	case StageInspect:
		return "reading the pushed image back: " + e.Err.Error()
	}
	return string(e.Stage) + ": " + e.Err.Error()
}

func (e *StageError) Unwrap() error { return e.Err }

// BaseImagePlatformError says that a base image has no image for the
// target platform.
type BaseImagePlatformError struct {
	// Image is the base image as the Dockerfile (or the strategy's from)
	// names it.
	Image string
	// Platform is the target platform.
	Platform string
	// Available are the platforms the image has, "os/arch[/variant]".
	Available []string
	// Single is true when Image is a single image rather than an index.
	Single bool
}

func (e *BaseImagePlatformError) Error() string {
	if e.Single {
		have := "no platform"
		if len(e.Available) > 0 {
			have = e.Available[0]
		}
		return fmt.Sprintf("base image %s is a single-platform image for %s, not for %s: "+
			"use a multi-platform base image, or leave %s out of the build's platforms",
			e.Image, have, e.Platform, e.Platform)
	}
	return fmt.Sprintf("base image %s has no image for %s; it has %s: "+
		"use a base image that has %s, or leave %s out of the build's platforms",
		e.Image, e.Platform, strings.Join(e.Available, ", "), e.Platform, e.Platform)
}

// BlockedError says that an image is on a registry the cluster's registry
// configuration blocks (blocked = true in the registries ConfigMap, or a
// mirror set's mirrorSourcePolicy NeverContactSource), and that no mirror
// serves the reference: the build neither pulls nor pushes it.
type BlockedError struct {
	// Image is the image as the build names it.
	Image string
	// Registry is the blocked prefix that matched.
	Registry string
	// DigestMirrors is set when the registry has mirrors for digest
	// references only and Image names a tag (an ImageDigestMirrorSet's
	// mirrors); TagMirrors when it has mirrors for tags only and Image
	// names a digest.
	DigestMirrors, TagMirrors bool
	// Push is set when the build pushes Image rather than pulls it.
	Push bool
}

func (e *BlockedError) Error() string {
	msg := fmt.Sprintf("image %s: registry %s is blocked by the cluster's registry configuration (blocked = true, or a mirror set's mirrorSourcePolicy NeverContactSource)", e.Image, e.Registry)
	switch {
	case e.Push:
		return msg + ": nothing is pushed to it; push to another registry"
	case e.DigestMirrors:
		return msg + ", and its mirrors serve digest references only: name the image by digest (image@sha256:...), or ask an administrator for an ImageTagMirrorSet"
	case e.TagMirrors:
		return msg + ", and its mirrors serve tag references only: name the image by tag, or ask an administrator for an ImageDigestMirrorSet"
	}
	return msg + ", and no mirror serves it: use an image from another registry, or ask an administrator for a mirror"
}
