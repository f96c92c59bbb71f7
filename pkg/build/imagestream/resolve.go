package imagestream

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/distribution/reference"
	imagev1 "github.com/openshift/api/image/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// ResolvedImagesAnnotation records on a Build the pull specs its image
// stream references were resolved to, once, before its first pod: a JSON
// object from each reference's field (Reference.Field) to a DockerImage
// pull spec. Every pod of the Build uses these, however the streams move
// afterwards. An archway annotation: OpenShift resolves the references
// into the build pod's copy of the Build and records only
// status.outputDockerImageReference.
const ResolvedImagesAnnotation = "build.archway.dev/resolved-images"

// Unresolved says why a reference cannot be resolved: the Build fails
// with Reason and Message.
type Unresolved struct {
	Reason  buildv1.StatusReason
	Message string
	// NoImage says the stream exists and the tag has no image yet.
	NoImage bool
}

func (u *Unresolved) Error() string { return u.Message }

// imageStreamGVK is the kind read.
var imageStreamGVK = schema.GroupVersionKind{Group: Group, Version: "v1", Kind: "ImageStream"}

// Resolve resolves refs, the image stream references of a Build of
// namespace ns, reading the streams with reader: an ImageStreamTag in a
// from to the tag's current image (status.tags[].items[0]
// .dockerImageReference), an ImageStreamImage to the stream's image of
// that digest, and an ImageStreamTag in output.to to
// <status.dockerImageRepository>:<tag>. A reference that cannot be
// resolved is an *Unresolved; any other error is the apiserver's (try
// again).
func Resolve(ctx context.Context, reader client.Reader, ns string, refs []Reference) (map[string]string, error) {
	out := map[string]string{}
	for _, r := range refs {
		spec, err := resolveOne(ctx, reader, ns, r)
		if err != nil {
			return nil, err
		}
		out[r.Field] = spec
	}
	return out, nil
}

func resolveOne(ctx context.Context, reader client.Reader, ns string, r Reference) (string, error) {
	output := r.Field == FieldOutputTo
	reason := buildv1.StatusReasonInvalidImageReference
	if output {
		reason = buildv1.StatusReasonInvalidOutputReference
	}
	fail := func(format string, args ...any) error {
		return &Unresolved{Reason: reason, Message: r.Field + ": " + fmt.Sprintf(format, args...)}
	}
	if err := r.Check(); err != nil {
		return "", &Unresolved{Reason: reason, Message: err.Error()}
	}
	var stream, tag, digest string
	if r.Ref.Kind == KindImageStreamTag {
		stream, tag, _ = SplitTag(r.Ref.Name)
	} else {
		stream, digest, _ = SplitImage(r.Ref.Name)
	}
	if err := r.CheckNamespace(ns); err != nil {
		return "", &Unresolved{Reason: reason, Message: err.Error()}
	}
	is, err := get(ctx, reader, ns, stream)
	switch {
	case meta.IsNoMatchError(err):
		return "", fail("kind %s needs OpenShift image streams (%s %s), which this cluster does not serve", r.Ref.Kind, GroupVersion, Resource)
	case apierrors.IsNotFound(err):
		return "", fail("the image stream %s/%s does not exist", ns, stream)
	case err != nil:
		return "", err
	}
	if output {
		if is.Status.DockerImageRepository == "" {
			return "", fail("the image stream %s/%s has no status.dockerImageRepository (no integrated registry serves it), so nothing can be pushed to it", ns, stream)
		}
		repo, err := reference.ParseNormalizedNamed(is.Status.DockerImageRepository)
		if err != nil {
			return "", fail("the image stream %s/%s's status.dockerImageRepository %q is not a repository: %v", ns, stream, is.Status.DockerImageRepository, err)
		}
		tagged, err := reference.WithTag(reference.TrimNamed(repo), tag)
		if err != nil {
			return "", fail("tag %q: %v", tag, err)
		}
		return reference.FamiliarString(tagged), nil
	}
	if digest != "" {
		for _, t := range is.Status.Tags {
			for _, ev := range t.Items {
				if ev.Image == digest && ev.DockerImageReference != "" {
					return ev.DockerImageReference, nil
				}
			}
		}
		return "", fail("the image stream %s/%s has no image %s", ns, stream, digest)
	}
	for _, t := range is.Status.Tags {
		if t.Tag == tag && len(t.Items) > 0 && t.Items[0].DockerImageReference != "" {
			return t.Items[0].DockerImageReference, nil
		}
	}
	return "", &Unresolved{Reason: reason, NoImage: true, Message: fmt.Sprintf("%s: the image stream tag %s/%s has no image yet (status.tags has none for %q): "+
		"push or import one, then start the build again", r.Field, ns, r.Ref.Name, tag)}
}

// get reads an image stream without the scheme knowing the type.
func get(ctx context.Context, reader client.Reader, ns, name string) (*imagev1.ImageStream, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(imageStreamGVK)
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil, err
	}
	is := &imagev1.ImageStream{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, is); err != nil {
		return nil, fmt.Errorf("reading the image stream %s/%s: %w", ns, name, err)
	}
	return is, nil
}

// Apply returns a copy of b whose image stream references are the
// DockerImage pull specs its ResolvedImagesAnnotation records, and whether
// it records them all.
func Apply(b *buildv1.Build) (*buildv1.Build, bool, error) {
	raw, ok := b.Annotations[ResolvedImagesAnnotation]
	if !ok {
		return b, false, nil
	}
	var resolved map[string]string
	if err := json.Unmarshal([]byte(raw), &resolved); err != nil {
		return nil, false, fmt.Errorf("the annotation %s is not a JSON object of strings: %w", ResolvedImagesAnnotation, err)
	}
	out := b.DeepCopy()
	all := true
	specFields(&out.Spec.CommonSpec, func(field string, ref *corev1.ObjectReference) {
		if !IsStreamKind(ref.Kind) {
			return
		}
		spec, ok := resolved[field]
		if !ok {
			all = false
			return
		}
		*ref = corev1.ObjectReference{Kind: KindDockerImage, Name: spec}
	})
	return out, all, nil
}
