// Package imagestream is what archway does with OpenShift image streams
// (image.openshift.io/v1 ImageStreams): a Build's or BuildConfig's image
// references of kind ImageStreamTag or ImageStreamImage, which only a
// cluster serving that API can resolve. The CRDs admit these kinds; the
// validating webhook of this package (served by build-triggers) refuses
// them, naming the field, where discovery shows no image streams.
package imagestream

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// The image reference kinds.
const (
	// KindDockerImage names an image by its pull spec.
	KindDockerImage = "DockerImage"
	// KindImageStreamTag names a tag of an image stream: <stream>:<tag>.
	KindImageStreamTag = "ImageStreamTag"
	// KindImageStreamImage names an image of an image stream by its
	// digest: <stream>@<digest>.
	KindImageStreamImage = "ImageStreamImage"
)

// The image stream API.
const (
	// Group is the image stream API's group.
	Group = "image.openshift.io"
	// GroupVersion is the version archway reads.
	GroupVersion = Group + "/v1"
	// Resource is the image streams' resource.
	Resource = "imagestreams"
)

// IsStreamKind reports whether kind names an image stream reference.
func IsStreamKind(kind string) bool {
	return kind == KindImageStreamTag || kind == KindImageStreamImage
}

// Reference is an image reference of a Build or BuildConfig that names an
// image stream.
type Reference struct {
	// Field is the reference's path in the object, e.g.
	// spec.strategy.dockerStrategy.from.
	Field string
	// Ref is the reference.
	Ref corev1.ObjectReference
}

// The fields of a common spec that hold image references.
const (
	FieldDockerFrom = "spec.strategy.dockerStrategy.from"
	FieldSourceFrom = "spec.strategy.sourceStrategy.from"
	FieldOutputTo   = "spec.output.to"
)

// specFields calls f with each image reference field of spec that is set.
func specFields(spec *buildv1.CommonSpec, f func(field string, ref *corev1.ObjectReference)) {
	if ds := spec.Strategy.DockerStrategy; ds != nil && ds.From != nil {
		f(FieldDockerFrom, ds.From)
	}
	if ss := spec.Strategy.SourceStrategy; ss != nil {
		f(FieldSourceFrom, &ss.From)
	}
	if spec.Output.To != nil {
		f(FieldOutputTo, spec.Output.To)
	}
}

// SpecReferences returns the image stream references of a Build's or
// BuildConfig's common spec: the strategy's from and output.to.
func SpecReferences(spec *buildv1.CommonSpec) []Reference {
	var out []Reference
	specFields(spec, func(field string, ref *corev1.ObjectReference) {
		if IsStreamKind(ref.Kind) {
			out = append(out, Reference{Field: field, Ref: *ref})
		}
	})
	return out
}

// BuildConfigReferences returns a BuildConfig's image stream references:
// its spec's and its ImageChange triggers'.
func BuildConfigReferences(bc *buildv1.BuildConfig) []Reference {
	out := SpecReferences(&bc.Spec.CommonSpec)
	for i, t := range bc.Spec.Triggers {
		if t.ImageChange != nil && t.ImageChange.From != nil && IsStreamKind(t.ImageChange.From.Kind) {
			out = append(out, Reference{Field: fmt.Sprintf("spec.triggers[%d].imageChange.from", i), Ref: *t.ImageChange.From})
		}
	}
	return out
}

// SplitTag splits an ImageStreamTag's name, <stream>:<tag>.
func SplitTag(name string) (stream, tag string, err error) {
	stream, tag, ok := strings.Cut(name, ":")
	if !ok || stream == "" || tag == "" || strings.ContainsAny(stream, ":@/") || strings.ContainsAny(tag, ":@/") {
		return "", "", fmt.Errorf("an ImageStreamTag's name is <stream>:<tag>, e.g. base:1.0, not %q", name)
	}
	return stream, tag, nil
}

// SplitImage splits an ImageStreamImage's name, <stream>@<digest>.
func SplitImage(name string) (stream, digest string, err error) {
	stream, digest, ok := strings.Cut(name, "@")
	if !ok || stream == "" || digest == "" || strings.ContainsAny(stream, ":@/") || strings.ContainsAny(digest, "@/") {
		return "", "", fmt.Errorf("an ImageStreamImage's name is <stream>@<digest>, e.g. base@sha256:..., not %q", name)
	}
	return stream, digest, nil
}

// Check reports what is wrong with a reference's name for its kind, or
// nil.
func (r Reference) Check() error {
	var err error
	switch r.Ref.Kind {
	case KindImageStreamTag:
		_, _, err = SplitTag(r.Ref.Name)
	case KindImageStreamImage:
		_, _, err = SplitImage(r.Ref.Name)
	}
	if err != nil {
		return fmt.Errorf("%s.name: %w", r.Field, err)
	}
	return nil
}

// CheckNamespace refuses a reference to an image stream of another
// namespace than ns, the Build's: build-controller resolves references
// with its own rights, which would show the creator another namespace's
// images.
func (r Reference) CheckNamespace(ns string) error {
	if r.Ref.Namespace != "" && r.Ref.Namespace != ns {
		return fmt.Errorf("%s.namespace: %q: only image streams of the object's own namespace (%s) can be named; leave namespace out, "+
			"or use kind DockerImage with the image's reference", r.Field, r.Ref.Namespace, ns)
	}
	return nil
}
