package v1_test

import (
	"encoding/json"
	"math/rand"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// fillerFor returns a filler that populates every field (no nil pointers,
// no empty slices or maps), with values that survive JSON: whole-second
// times, valid quantities and JSON objects in raw fields.
func fillerFor(seed int64) *randfill.Filler {
	scheme := runtime.NewScheme()
	codecs := serializer.NewCodecFactory(scheme)
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []interface{} {
		return []interface{}{
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
			},
			// The fields archway refuses (source.images, customStrategy,
			// jenkinsPipelineStrategy) hold any JSON object; the empty one
			// reads the same into each of OpenShift's types.
			func(r *runtime.RawExtension, _ randfill.Continue) { r.Raw = []byte("{}") },
		}
	})
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), codecs).NilChance(0).NumElements(1, 3)
}

// roundTripObjects are the kinds of the package, each filled anew per seed.
func roundTripObjects() map[string]func() runtime.Object {
	return map[string]func() runtime.Object{
		"Build":           func() runtime.Object { return &buildv1.Build{} },
		"BuildList":       func() runtime.Object { return &buildv1.BuildList{} },
		"BuildConfig":     func() runtime.Object { return &buildv1.BuildConfig{} },
		"BuildConfigList": func() runtime.Object { return &buildv1.BuildConfigList{} },
	}
}

func TestDeepCopyAndJSONRoundTrip(t *testing.T) {
	for name, newObj := range roundTripObjects() {
		t.Run(name, func(t *testing.T) {
			for seed := int64(0); seed < 20; seed++ {
				g := NewWithT(t)
				orig := newObj()
				fillerFor(seed).Fill(orig)
				origJSON, err := json.Marshal(orig)
				g.Expect(err).NotTo(HaveOccurred())

				// A deep copy is equal and shares nothing: refilling the copy
				// leaves the original as it was.
				cp := orig.DeepCopyObject()
				g.Expect(apiequality.Semantic.DeepEqual(orig, cp)).To(BeTrue(), "seed %d: deep copy differs", seed)
				fillerFor(seed + 1000).Fill(cp)
				afterJSON, err := json.Marshal(orig)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(afterJSON).To(MatchJSON(origJSON), "seed %d: changing the deep copy changed the original", seed)

				// JSON decodes, strictly and case-sensitively as the apiserver
				// does, into an equal object that encodes the same.
				decoded := newObj()
				g.Expect(strictUnmarshal(origJSON, decoded)).To(Succeed(), "seed %d", seed)
				g.Expect(apiequality.Semantic.DeepEqual(orig, decoded)).To(BeTrue(), "seed %d: decoded object differs", seed)
				againJSON, err := json.Marshal(decoded)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(againJSON).To(MatchJSON(origJSON), "seed %d", seed)
			}
		})
	}
}

// TestFilledObjectsAreFull guards the round-trip test itself: a filler that
// left fields empty would make it pass without checking them.
func TestFilledObjectsAreFull(t *testing.T) {
	g := NewWithT(t)
	b := &buildv1.Build{}
	fillerFor(2).Fill(b)
	g.Expect(b.Spec.Platforms).NotTo(BeEmpty())
	g.Expect(b.Spec.Source.Git).NotTo(BeNil())
	g.Expect(b.Spec.Source.Git.HTTPSProxy).NotTo(BeNil())
	g.Expect(b.Spec.Strategy.DockerStrategy).NotTo(BeNil())
	g.Expect(b.Spec.Strategy.DockerStrategy.Volumes).NotTo(BeEmpty())
	g.Expect(b.Status.Platforms).NotTo(BeEmpty())
	g.Expect(b.Status.Platforms[0].Output).NotTo(BeNil())
	g.Expect(b.Status.Platforms[0].Output.OSFeatures).NotTo(BeEmpty())
	g.Expect(b.Status.Duration).NotTo(BeZero())
	g.Expect(b.Status.Conditions).NotTo(BeEmpty())

	raw, err := json.Marshal(b)
	g.Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	entry := m["status"].(map[string]any)["platforms"].([]any)[0].(map[string]any)
	g.Expect(entry["output"]).To(HaveKey("os.version"), "the OCI image-spec name of the field")
	g.Expect(entry["output"]).To(HaveKey("os.features"))
}
