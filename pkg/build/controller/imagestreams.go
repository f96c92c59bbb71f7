package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/pkg/consistency"
)

// resolveImageStreams returns b with its image stream references
// (ImageStreamTag, ImageStreamImage) replaced by the DockerImage pull specs
// its imagestream.ResolvedImagesAnnotation records, for every use the
// controller makes of them: the pods' copy of the Build, the base checks,
// status.outputDockerImageReference. A Build without the record has its
// references resolved from their image streams and recorded first, once,
// so that every platform's pod builds the same image whatever the streams
// do next (done: the write enqueues the Build again); one that cannot be
// resolved fails the Build (failure), as OpenShift's reasons say.
func (r *Reconciler) resolveImageStreams(ctx context.Context, b *buildv1.Build, s *consistency.Session) (out *buildv1.Build, failure *Failure, done bool, err error) {
	refs := imagestream.SpecReferences(&b.Spec.CommonSpec)
	if len(refs) == 0 {
		return b, nil, false, nil
	}
	out, all, err := imagestream.Apply(b)
	if err != nil {
		return nil, &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonInvalidImageReference, Message: err.Error()}, false, nil
	}
	if all {
		return out, nil, false, nil
	}
	resolved, err := imagestream.Resolve(ctx, r.APIReader, b.Namespace, refs)
	var unresolved *imagestream.Unresolved
	if errors.As(err, &unresolved) {
		return nil, &Failure{Phase: buildv1.BuildPhaseFailed, Reason: unresolved.Reason, Message: unresolved.Message}, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("resolving the build's image stream references: %w", err)
	}
	raw, err := json.Marshal(resolved)
	if err != nil {
		return nil, nil, false, err
	}
	// With the version the resolution was made on, as annotate does.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{imagestream.ResolvedImagesAnnotation: string(raw)}, "resourceVersion": b.ResourceVersion}})
	if err != nil {
		return nil, nil, false, err
	}
	if err := r.Client.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return nil, nil, false, fmt.Errorf("recording the resolved image stream references: %w", err)
	}
	s.Wrote()
	r.event(b, corev1.EventTypeNormal, "ImageStreamsResolved", "Resolved the image stream references: %s", raw)
	return nil, nil, true, nil
}
