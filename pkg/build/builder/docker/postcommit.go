package docker

import (
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
)

// postCommit is the Build's post-commit hook as the image builder runs it,
// nil for none, with OpenShift's meaning of each form:
//   - script: /bin/sh -ic SCRIPT, with args as the positional parameters
//     ($0 is /bin/sh, $1 the first of args);
//   - command: replaces the image's entrypoint, args following it;
//   - args alone: the image's entrypoint, with args.
func postCommit(spec buildv1.BuildPostCommitSpec) *image.PostCommit {
	switch {
	case spec.Script != "":
		return &image.PostCommit{Command: []string{"/bin/sh", "-ic", spec.Script, "/bin/sh"}, Args: spec.Args}
	case len(spec.Command) > 0:
		return &image.PostCommit{Command: spec.Command, Args: spec.Args}
	case len(spec.Args) > 0:
		return &image.PostCommit{Args: spec.Args}
	}
	return nil
}
