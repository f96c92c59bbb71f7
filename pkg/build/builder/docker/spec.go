package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/platform"
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

// resolve returns the values of a Docker strategy's env or buildArgs: an
// entry with a valueFrom takes the value of the build container's
// environment variable prefix+i, which the controller sets with the same
// valueFrom (pkg/build/controller's ValueFromEnv) and the kubelet resolves.
func resolve(vars []corev1.EnvVar, what, prefix string, lookup func(string) (string, bool)) ([]corev1.EnvVar, error) {
	out := make([]corev1.EnvVar, 0, len(vars))
	for i, v := range vars {
		if v.ValueFrom != nil {
			name := fmt.Sprintf("%s%d", prefix, i)
			value, ok := lookup(name)
			if !ok {
				return nil, &statusError{reason: buildv1.StatusReasonUnresolvableEnvironmentVariable,
					err: fmt.Errorf("%s %s has a valueFrom, but the build pod has no %s, which build-controller sets from it: run the build through build-controller, or give a value", what, v.Name, name)}
			}
			v = corev1.EnvVar{Name: v.Name, Value: value}
		}
		out = append(out, v)
	}
	return out, nil
}

// buildArgs returns a Docker strategy's buildArgs as ARG values, valueFrom
// resolved (resolve).
func buildArgs(vars []corev1.EnvVar, lookup func(string) (string, bool)) (map[string]string, error) {
	resolved, err := resolve(vars, "build arg", buildv1.StrategyBuildArgValueFromPrefix, lookup)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(resolved))
	for _, v := range resolved {
		out[v.Name] = v.Value
	}
	return out, nil
}

// buildEnv returns a Docker strategy's env as KEY=VALUE, valueFrom resolved
// (resolve).
func buildEnv(vars []corev1.EnvVar, lookup func(string) (string, bool)) ([]string, error) {
	resolved, err := resolve(vars, "environment variable", buildv1.StrategyEnvValueFromPrefix, lookup)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(resolved))
	for _, v := range resolved {
		out = append(out, v.Name+"="+v.Value)
	}
	return out, nil
}

// buildVolumeMountDir is where the build controller mounts a Docker
// strategy's volumes in the build pod, one directory per volume name
// (pkg/build/controller's BuildVolumeMountDir).
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

// TrustedCABundleFile is the file of the cluster's trusted CA bundle in
// the directory the build controller mounts it in
// (pkg/build/controller's TrustedCAMountDir), and TrustedCAMountDir that
// directory.
const (
	TrustedCABundleFile = "tls-ca-bundle.pem"
	TrustedCAMountDir   = "/var/run/configs/openshift.io/pki"
)

// trustedCAPaths are where RUN steps of a Build with mountTrustedCA find
// the cluster's trusted CA bundle: the system trust paths of the Red Hat
// family (what OpenShift's builder gives them, /etc/pki/ca-trust) and of
// the Debian and Alpine families.
var trustedCAPaths = []string{
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/certs/ca-certificates.crt",
}

// trustedCAMounts returns the bind mounts that give RUN steps the bundle
// in dir, read-only, at every trustedCAPaths; the bundle must be there.
func trustedCAMounts(dir string) ([]string, error) {
	// A ConfigMap volume's file is a symbolic link into the volume's
	// current data: the step gets the file it names.
	bundle, err := filepath.EvalSymlinks(filepath.Join(dir, TrustedCABundleFile))
	if err != nil {
		return nil, fmt.Errorf("spec.mountTrustedCA is true, but the trusted CA bundle is not mounted in the build pod: %w", err)
	}
	info, err := os.Stat(bundle)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("spec.mountTrustedCA is true, but %s is not a file", bundle)
	}
	out := make([]string, 0, len(trustedCAPaths))
	for _, p := range trustedCAPaths {
		out = append(out, bundle+":"+p+":ro")
	}
	return out, nil
}

// withoutDestinations returns the mounts of add ("source:destination:opts")
// whose destination none of have mounts.
func withoutDestinations(add, have []string) []string {
	dest := func(m string) string {
		parts := strings.SplitN(m, ":", 3)
		if len(parts) < 2 {
			return ""
		}
		return filepath.Clean(parts[1])
	}
	var out []string
	for _, m := range add {
		if !slices.ContainsFunc(have, func(h string) bool { return dest(h) == dest(m) }) {
			out = append(out, m)
		}
	}
	return out
}

// layerCacheRepository returns the repository of the target platform's
// layer cache: the Build's layerCache.repository, or else output's
// repository followed by "-cache", with the platform's suffix
// (platform.CacheRepository). It returns "" when the Build has no layer
// cache, or has one but neither a repository nor an output to derive one
// from.
func layerCacheRepository(cache *buildv1.LayerCache, output string, target platform.Platform) (string, error) {
	if cache == nil || cache.Mode != buildv1.LayerCacheRegistry {
		return "", nil
	}
	repo := cache.Repository
	if repo == "" {
		if output == "" {
			return "", nil
		}
		var err error
		if repo, err = platform.OutputCacheRepository(output); err != nil {
			return "", fmt.Errorf("the layer cache's repository from the output: %w", err)
		}
	}
	name, err := platform.CacheRepository(repo, target.String())
	if err != nil {
		return "", fmt.Errorf("spec.strategy.dockerStrategy.layerCache.repository: %w", err)
	}
	return name, nil
}
