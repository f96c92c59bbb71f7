package v1alpha1

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// filler fills every field with values the schemas of both versions accept.
func filler(seed int64) *randfill.Filler {
	codecs := serializer.NewCodecFactory(runtime.NewScheme())
	archs := multiarchv1beta1.KnownArchitectures()
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, func(serializer.CodecFactory) []interface{} {
		return []interface{}{
			func(m *metav1.ObjectMeta, c randfill.Continue) {
				c.FillNoCustom(m)
				// The reserved keys are the conversion's own.
				delete(m.Annotations, FallbackArchitectureAnnotation)
				delete(m.Annotations, V1beta1FieldsAnnotation)
			},
			func(l *LogVerbosityLevel, c randfill.Continue) {
				*l = []LogVerbosityLevel{"Normal", "Debug", "Trace", "TraceAll"}[c.Intn(4)]
			},
			func(s *multiarchv1beta1.ClusterPodPlacementConfigSpec, c randfill.Continue) {
				c.FillNoCustom(s)
				s.LogVerbosity = []multiarchv1beta1.LogVerbosityLevel{"Normal", "Debug", "Trace", "TraceAll"}[c.Intn(4)]
				s.FallbackArchitecture = append([]string{""}, archs...)[c.Intn(len(archs)+1)]
				s.PreferenceMerge = []multiarchv1beta1.PreferenceMerge{"", multiarchv1beta1.PreferenceMergeHighestPriority,
					multiarchv1beta1.PreferenceMergePerArchitecture}[c.Intn(3)]
			},
			func(n *multiarchv1beta1.NodeAffinityScoring, c randfill.Continue) {
				n.Enabled = c.Bool()
				n.Platforms = nil
				for _, i := range rand.New(rand.NewSource(c.Int63())).Perm(len(archs))[:1+c.Intn(len(archs))] {
					n.Platforms = append(n.Platforms, multiarchv1beta1.NodeAffinityScoringPlatformTerm{Architecture: archs[i], Weight: 1 + c.Int31n(100)})
				}
			},
			func(s *multiarchv1beta1.ClusterPodPlacementConfigStatus, c randfill.Continue) {
				c.FillNoCustom(s)
				s.ObservedGeneration = c.Int63n(1 << 40)
			},
		}
	})
	return fuzzer.FuzzerFor(funcs, rand.NewSource(seed), codecs).NilChance(0.3).NumElements(0, 3)
}

// TestRoundTripFromV1alpha1: every v1alpha1 object comes back from v1beta1
// as it was, and the conversion leaves its source alone.
func TestRoundTripFromV1alpha1(t *testing.T) {
	for seed := int64(0); seed < 500; seed++ {
		orig := &ClusterPodPlacementConfig{}
		filler(seed).Fill(orig)
		orig.TypeMeta = metav1.TypeMeta{} // the conversion webhook sets it
		before := orig.DeepCopy()
		hub := &multiarchv1beta1.ClusterPodPlacementConfig{}
		if err := orig.ConvertTo(hub); err != nil {
			t.Fatalf("seed %d: ConvertTo: %v", seed, err)
		}
		back := &ClusterPodPlacementConfig{}
		if err := back.ConvertFrom(hub); err != nil {
			t.Fatalf("seed %d: ConvertFrom: %v", seed, err)
		}
		if !apiequality.Semantic.DeepEqual(orig, back) {
			t.Fatalf("seed %d: v1alpha1 -> v1beta1 -> v1alpha1 changed the object (-orig +back):\n%s", seed, cmp.Diff(orig, back))
		}
		if !apiequality.Semantic.DeepEqual(orig, before) {
			t.Fatalf("seed %d: ConvertTo modified its source:\n%s", seed, cmp.Diff(before, orig))
		}
	}
}

// TestRoundTripFromV1beta1: every v1beta1 field survives v1alpha1, the ones
// v1alpha1 lacks in its annotations, and the stored object gets no
// annotation of the conversion's.
func TestRoundTripFromV1beta1(t *testing.T) {
	for seed := int64(0); seed < 500; seed++ {
		orig := &multiarchv1beta1.ClusterPodPlacementConfig{}
		filler(seed).Fill(orig)
		orig.TypeMeta = metav1.TypeMeta{}
		before := orig.DeepCopy()
		spoke := &ClusterPodPlacementConfig{}
		if err := spoke.ConvertFrom(orig); err != nil {
			t.Fatalf("seed %d: ConvertFrom: %v", seed, err)
		}
		back := &multiarchv1beta1.ClusterPodPlacementConfig{}
		if err := spoke.ConvertTo(back); err != nil {
			t.Fatalf("seed %d: ConvertTo: %v (annotations %v)", seed, err, spoke.Annotations)
		}
		if !apiequality.Semantic.DeepEqual(orig, back) {
			t.Fatalf("seed %d: v1beta1 -> v1alpha1 -> v1beta1 changed the object (-orig +back):\n%s", seed, cmp.Diff(orig, back))
		}
		if !apiequality.Semantic.DeepEqual(orig, before) {
			t.Fatalf("seed %d: ConvertFrom modified its source:\n%s", seed, cmp.Diff(before, orig))
		}
	}
}

// TestV1alpha1View: what a v1alpha1 client sees of a v1beta1 config.
func TestV1alpha1View(t *testing.T) {
	hub := &multiarchv1beta1.ClusterPodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", Annotations: map[string]string{"team": "a"}},
		Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{
			LogVerbosity: multiarchv1beta1.LogVerbosityDebug, FallbackArchitecture: "arm64",
			PreferenceMerge: multiarchv1beta1.PreferenceMergeHighestPriority,
			Plugins: &multiarchv1beta1.Plugins{NodeAffinityScoring: &multiarchv1beta1.NodeAffinityScoring{
				Enabled: true, Platforms: []multiarchv1beta1.NodeAffinityScoringPlatformTerm{{Architecture: "arm64", Weight: 40}},
			}},
		},
	}
	spoke := &ClusterPodPlacementConfig{}
	if err := spoke.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"team":                         "a",
		FallbackArchitectureAnnotation: "arm64",
		V1beta1FieldsAnnotation:        `{"plugins":{"nodeAffinityScoring":{"enabled":true,"platforms":[{"architecture":"arm64","weight":40}]}},"preferenceMerge":"HighestPriority"}`,
	}
	if diff := cmp.Diff(want, spoke.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if spoke.Spec.LogVerbosity != "Debug" {
		t.Errorf("logVerbosity %q", spoke.Spec.LogVerbosity)
	}

	// A config with only what v1alpha1 has gets no annotation.
	plain := &ClusterPodPlacementConfig{}
	if err := plain.ConvertFrom(&multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}); err != nil {
		t.Fatal(err)
	}
	if plain.Annotations != nil {
		t.Errorf("annotations %v on a config v1alpha1 expresses whole", plain.Annotations)
	}
}

// TestConvertToRefusesBadAnnotations: the apiserver checks a v1alpha1
// write against the v1alpha1 schema only, so the annotations' values are
// checked by the conversion, which refuses what v1beta1's schema would.
func TestConvertToRefusesBadAnnotations(t *testing.T) {
	for _, tt := range []struct {
		name, key, value, want string
	}{
		{name: "unknown architecture", key: FallbackArchitectureAnnotation, value: "mips64", want: `"mips64" is not an architecture`},
		{name: "not JSON", key: V1beta1FieldsAnnotation, value: "plugins: {}", want: "not a JSON object"},
		{name: "unknown field", key: V1beta1FieldsAnnotation, value: `{"fallbackArchitecture":"arm64"}`, want: "unknown field"},
		{name: "two values", key: V1beta1FieldsAnnotation, value: `{} {}`, want: "more than one JSON value"},
		{name: "weight out of range", key: V1beta1FieldsAnnotation,
			value: `{"plugins":{"nodeAffinityScoring":{"enabled":true,"platforms":[{"architecture":"arm64","weight":101}]}}}`, want: "weight 101: write 1 to 100"},
		{name: "architecture twice", key: V1beta1FieldsAnnotation,
			value: `{"plugins":{"nodeAffinityScoring":{"enabled":true,"platforms":[{"architecture":"arm64","weight":1},{"architecture":"arm64","weight":2}]}}}`, want: "listed twice"},
		{name: "unknown scoring architecture", key: V1beta1FieldsAnnotation,
			value: `{"plugins":{"nodeAffinityScoring":{"enabled":true,"platforms":[{"architecture":"riscv64","weight":1}]}}}`, want: `"riscv64": write one of`},
		{name: "no platforms", key: V1beta1FieldsAnnotation, value: `{"plugins":{"nodeAffinityScoring":{"enabled":true,"platforms":[]}}}`, want: "0 entries"},
		{name: "unknown merge", key: V1beta1FieldsAnnotation, value: `{"preferenceMerge":"Sum"}`, want: `preferenceMerge "Sum"`},
		{name: "negative generation", key: V1beta1FieldsAnnotation, value: `{"observedGeneration":-1}`, want: "negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spoke := &ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Annotations: map[string]string{tt.key: tt.value}}}
			err := spoke.ConvertTo(&multiarchv1beta1.ClusterPodPlacementConfig{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %v, want one naming %s and saying %q", err, tt.key, tt.want)
			}
		})
	}
}
