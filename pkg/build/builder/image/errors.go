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
	// Role is what the image is to the build, as the message names it.
	// Default: base image.
	Role string
}

func (e *BaseImagePlatformError) Error() string {
	role := e.Role
	if role == "" {
		role = "base image"
	}
	if e.Single {
		have := "no platform"
		if len(e.Available) > 0 {
			have = e.Available[0]
		}
		return fmt.Sprintf("%s %s is a single-platform image for %s, not for %s: "+
			"use a multi-platform %s, or leave %s out of the build's platforms",
			role, e.Image, have, e.Platform, role, e.Platform)
	}
	return fmt.Sprintf("%s %s has no image for %s; it has %s: "+
		"use a %s that has %s, or leave %s out of the build's platforms",
		role, e.Image, e.Platform, strings.Join(e.Available, ", "), role, e.Platform, e.Platform)
}
