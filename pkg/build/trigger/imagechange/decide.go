// Package imagechange runs the ImageChange triggers of BuildConfigs: it
// polls the registry of each trigger's DockerImage and starts a build
// (through package instantiate, as every trigger does) when the digest the
// reference resolves to is not the one the trigger last built, as
// OpenShift's image trigger controller does for image stream tags; an
// ImageStreamTag trigger reads the tag's current image from its stream,
// watched where the cluster serves image streams.
//
// Watched decides what a BuildConfig's triggers watch and Decide what a
// poll's digests start; the reconciler reads the credentials, resolves the
// digests and carries the decision out.
package imagechange

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/dockerfile"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/pkg/build/instantiate"
)

// Trigger is one ImageChange trigger as a poll sees it.
type Trigger struct {
	// Image is the reference watched, as the BuildConfig writes it.
	Image string
	// Kind is Image's kind: DockerImage (polled in its registry) or
	// ImageStreamTag (read from its image stream, which is watched where
	// the cluster serves image streams).
	Kind string
	// StrategyFrom says Image is the strategy's from: a build it starts
	// builds from the digest that started it.
	StrategyFrom bool
	// Paused is the trigger's imageChange.paused.
	Paused bool
	// LastTriggeredImageID is the trigger's spec.imageChange
	// lastTriggeredImageID (deprecated in OpenShift for the status).
	LastTriggeredImageID string
	// Err says why the image cannot be told (no poll).
	Err error
}

// Watched returns bc's ImageChange triggers: the image of each
// (imageChange.from, else the strategy's from, else the last FROM of an
// inline Dockerfile when it is written out).
func Watched(bc *buildv1.BuildConfig) []Trigger {
	var out []Trigger
	strategyFrom := strategyFromRef(bc.Spec.Strategy)
	for _, t := range bc.Spec.Triggers {
		if t.Type != buildv1.ImageChangeBuildTriggerType || t.ImageChange == nil {
			continue
		}
		tr := Trigger{Kind: imagestream.KindDockerImage, Paused: t.ImageChange.Paused, LastTriggeredImageID: t.ImageChange.LastTriggeredImageID}
		switch {
		case t.ImageChange.From != nil:
			tr.Kind, tr.Image = t.ImageChange.From.Kind, t.ImageChange.From.Name
			tr.StrategyFrom = strategyFrom != nil && tr.Kind == strategyFrom.Kind && tr.Image == strategyFrom.Name
		case strategyFrom != nil:
			tr.Kind, tr.Image, tr.StrategyFrom = strategyFrom.Kind, strategyFrom.Name, true
		default:
			tr.Image, tr.Err = dockerfileBase(bc.Spec.Source.Dockerfile)
		}
		switch tr.Kind {
		case imagestream.KindImageStreamTag:
			_, _, tr.Err = imagestream.SplitTag(tr.Image)
			out = append(out, tr)
			continue
		case imagestream.KindDockerImage:
		default:
			tr.Err = fmt.Errorf("kind %s %s cannot be watched: an ImageChange trigger watches a DockerImage or an ImageStreamTag", tr.Kind, tr.Image)
		}
		if tr.Err == nil {
			if _, err := reference.ParseNormalizedNamed(tr.Image); err != nil {
				tr.Err = fmt.Errorf("the watched image %q is not an image reference: %w", tr.Image, err)
			}
		}
		out = append(out, tr)
	}
	return out
}

// StrategyFrom is the strategy's from when it names a DockerImage, else "".
func StrategyFrom(s buildv1.BuildStrategy) string {
	if from := strategyFromRef(s); from != nil && from.Kind == imagestream.KindDockerImage {
		return from.Name
	}
	return ""
}

// strategyFromRef is the strategy's from, or nil.
func strategyFromRef(s buildv1.BuildStrategy) *corev1.ObjectReference {
	switch {
	case s.DockerStrategy != nil:
		return s.DockerStrategy.From
	case s.SourceStrategy != nil:
		return &s.SourceStrategy.From
	}
	return nil
}

// dockerfileBase is the image the last stage of an inline Dockerfile is
// built on, following stages that start from earlier ones.
func dockerfileBase(df *string) (string, error) {
	if df == nil || *df == "" {
		return "", fmt.Errorf("the trigger has no image to watch: set imageChange.from or the strategy's from " +
			"(a Dockerfile read from the Git repository is known only inside the build pod)")
	}
	f, err := dockerfile.Parse([]byte(*df))
	if err != nil {
		return "", fmt.Errorf("reading the inline Dockerfile: %w", err)
	}
	im := f.Images(nil, dockerfile.Literal)
	i := len(im.Stages) - 1
	for i >= 0 && im.Stages[i].FromStage >= 0 && im.Stages[i].FromStage < i {
		i = im.Stages[i].FromStage
	}
	if i < 0 || !im.Stages[i].Told || im.Stages[i].Ref == "" || im.Stages[i].PlatformFlag {
		return "", fmt.Errorf("the inline Dockerfile's last stage is not built on an image written out " +
			"(scratch, a build arg, or a --platform of its own): set imageChange.from")
	}
	return im.Stages[i].Ref, nil
}

// ImageID is the pull spec of the image ref resolved to d: its repository,
// as written, at the digest (what OpenShift records as an image's ID).
func ImageID(ref string, d digest.Digest) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", err
	}
	repo := ref
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if tagged, ok := named.(reference.Tagged); ok {
		repo = strings.TrimSuffix(repo, ":"+tagged.Tag())
	}
	return repo + "@" + d.String(), nil
}

// Observation is what one poll of a trigger gave.
type Observation struct {
	Trigger
	// ImageID is the image the reference resolves to now (ImageID).
	ImageID string
}

// Plan is what a poll does.
type Plan struct {
	// Start, when set, starts a build with this request.
	Start *instantiate.Request
	// Record, when set without Start, replaces status.imageChangeTriggers
	// without a build: the first observation of a BuildConfig whose
	// ConfigChange build built the image.
	Record []buildv1.ImageChangeTriggerStatus
}

// Decide plans for bc given the poll's observations (paused and failed
// triggers left out). As in OpenShift, an image whose ID is not the one the
// trigger last started a build of starts one, the first observation
// included, with an "Image change" cause per image naming its ID and
// reference; the build takes the strategy's from at that ID. One
// exception: when the BuildConfig has a ConfigChange trigger, an image
// never recorded is recorded without a build, as OpenShift's ConfigChange
// build records the images it resolved.
func Decide(bc *buildv1.BuildConfig, obs []Observation, now metav1.Time) Plan {
	status := slices.Clone(bc.Status.ImageChangeTriggers)
	var causes []buildv1.BuildTriggerCause
	var pin string
	changed := false
	configChange := slices.ContainsFunc(bc.Spec.Triggers, func(t buildv1.BuildTriggerPolicy) bool {
		return t.Type == buildv1.ConfigChangeBuildTriggerType
	})
	for _, o := range obs {
		i := slices.IndexFunc(status, func(s buildv1.ImageChangeTriggerStatus) bool { return s.From.Name == o.Image })
		last := o.LastTriggeredImageID
		if i >= 0 {
			last = status[i].LastTriggeredImageID
		}
		if last == o.ImageID {
			continue
		}
		from := buildv1.ImageStreamTagReference{Name: o.Image}
		ref := &corev1.ObjectReference{Kind: imagestream.KindDockerImage, Name: o.Image}
		if o.Kind == imagestream.KindImageStreamTag {
			from.Namespace = bc.Namespace
			ref = &corev1.ObjectReference{Kind: imagestream.KindImageStreamTag, Namespace: bc.Namespace, Name: o.Image}
		}
		entry := buildv1.ImageChangeTriggerStatus{LastTriggeredImageID: o.ImageID, From: from, LastTriggerTime: now}
		if i >= 0 {
			status[i] = entry
		} else {
			status = append(status, entry)
		}
		changed = true
		if last == "" && configChange {
			continue
		}
		if slices.ContainsFunc(causes, func(c buildv1.BuildTriggerCause) bool { return c.ImageChangeBuild.FromRef.Name == o.Image }) {
			continue
		}
		causes = append(causes, buildv1.BuildTriggerCause{
			Message:          instantiate.CauseImageChange,
			ImageChangeBuild: &buildv1.ImageChangeCause{ImageID: o.ImageID, FromRef: ref},
		})
		if o.StrategyFrom && pin == "" {
			pin = o.ImageID
		}
	}
	switch {
	case len(causes) > 0:
		req := &instantiate.Request{TriggeredBy: causes, ImageChangeTriggers: status}
		if pin != "" {
			req.From = &corev1.ObjectReference{Kind: "DockerImage", Name: pin}
		}
		return Plan{Start: req}
	case changed:
		return Plan{Record: status}
	}
	return Plan{}
}
