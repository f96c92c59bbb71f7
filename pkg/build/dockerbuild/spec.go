package dockerbuild

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/source"
)

// The labels OpenShift's builder puts on every image it builds, saying
// which build and which source made it.
const (
	labelBuildName          = "io.openshift.build.name"
	labelBuildNamespace     = "io.openshift.build.namespace"
	labelCommitID           = "io.openshift.build.commit.id"
	labelCommitRef          = "io.openshift.build.commit.ref"
	labelCommitAuthor       = "io.openshift.build.commit.author"
	labelCommitMessage      = "io.openshift.build.commit.message"
	labelSourceLocation     = "io.openshift.build.source-location"
	labelSourceContextDir   = "io.openshift.build.source-context-dir"
	maxCommitMessageInLabel = 500
)

// imageLabels returns the labels of a build's image: OpenShift's build and
// source labels, then the Build's output.imageLabels, which win.
func imageLabels(b *buildv1.Build, rev *buildv1.SourceRevision) map[string]string {
	labels := map[string]string{
		labelBuildName:      b.Name,
		labelBuildNamespace: b.Namespace,
	}
	src := b.Spec.Source
	if source.Type(src) == buildv1.BuildSourceGit && src.Git != nil {
		// Without the credentials a URI may carry: anyone who may pull
		// the image reads its labels.
		labels[labelSourceLocation] = source.RedactURI(src.Git.URI)
		if src.Git.Ref != "" {
			labels[labelCommitRef] = src.Git.Ref
		}
	}
	if src.ContextDir != "" {
		labels[labelSourceContextDir] = src.ContextDir
	}
	if rev != nil && rev.Git != nil {
		g := rev.Git
		labels[labelCommitID] = g.Commit
		if g.Author.Name != "" {
			labels[labelCommitAuthor] = fmt.Sprintf("%s <%s>", g.Author.Name, g.Author.Email)
		}
		if msg := g.Message; msg != "" {
			if len(msg) > maxCommitMessageInLabel {
				msg = msg[:maxCommitMessageInLabel]
			}
			labels[labelCommitMessage] = msg
		}
	}
	for _, l := range b.Spec.Output.ImageLabels {
		labels[l.Name] = l.Value
	}
	return labels
}

// buildArgs returns a Docker strategy's buildArgs as ARG values. The
// controller resolves valueFrom before it creates the pod, so one left here
// is an error.
func buildArgs(vars []corev1.EnvVar) (map[string]string, error) {
	out := make(map[string]string, len(vars))
	for _, v := range vars {
		if v.ValueFrom != nil {
			return nil, &statusError{reason: buildv1.StatusReasonUnresolvableEnvironmentVariable,
				err: fmt.Errorf("build arg %s has a valueFrom the controller did not resolve", v.Name)}
		}
		out[v.Name] = v.Value
	}
	return out, nil
}

// buildEnv returns a Docker strategy's env as KEY=VALUE, with the same rule
// for valueFrom as buildArgs.
func buildEnv(vars []corev1.EnvVar) ([]string, error) {
	out := make([]string, 0, len(vars))
	for _, v := range vars {
		if v.ValueFrom != nil {
			return nil, &statusError{reason: buildv1.StatusReasonUnresolvableEnvironmentVariable,
				err: fmt.Errorf("environment variable %s has a valueFrom the controller did not resolve", v.Name)}
		}
		out = append(out, v.Name+"="+v.Value)
	}
	return out, nil
}

// buildVolumeMountDir is where the build controller mounts a Docker
// strategy's volumes in the build pod, one directory per volume name
// (pkg/build's BuildVolumeMountDir).
const buildVolumeMountDir = "/var/run/openshift.io/volumes"

// runMounts returns the bind mounts that give RUN steps a Docker strategy's
// volumes, read-only, at their destination paths: the volumes are mounted
// in the pod under dir, one directory per volume name.
func runMounts(volumes []buildv1.BuildVolume, dir string) []string {
	var out []string
	for _, v := range volumes {
		for _, m := range v.Mounts {
			out = append(out, filepath.Join(dir, v.Name)+":"+m.DestinationPath+":ro")
		}
	}
	return out
}
