package v1_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	openshiftbuildv1 "github.com/openshift/api/build/v1"
	sigsjson "sigs.k8s.io/json"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// The tests in this file hold the promise of doc.go: a Build or BuildConfig
// in our JSON is an OpenShift one (plus the extensions), and the other way
// round (minus what archway does not support).

// extensionPaths are the fields archway adds to OpenShift's JSON.
var extensionPaths = [][]string{
	{"spec", "platforms"},
	{"spec", "platformsAllowedToFail"},
	{"spec", "source", "binary", "artifact"},
	{"spec", "strategy", "dockerStrategy", "layerCache"},
	{"spec", "strategy", "sourceStrategy", "layerCache"},
	{"status", "platforms"},
	{"status", "platformsSummary"},
	{"status", "durationSummary"},
	{"status", "podUID"},
}

// forEachItem applies f to obj, or to each item of a list.
func forEachItem(obj map[string]any, f func(map[string]any)) {
	items, ok := obj["items"].([]any)
	if !ok {
		f(obj)
		return
	}
	for _, it := range items {
		f(it.(map[string]any))
	}
}

func deletePath(obj map[string]any, path []string) {
	for _, p := range path[:len(path)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			return
		}
		obj = next
	}
	delete(obj, path[len(path)-1])
}

// toMap encodes v and decodes it as generic JSON without its zero values
// ("", 0, false, null, {} and []): whether one side writes a zero value or
// leaves it out (omitempty differs in places), both sides decode the same.
func toMap(g Gomega, v any) map[string]any {
	raw, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	g.Expect(json.Unmarshal(raw, &m)).To(Succeed())
	pruned, _ := pruneZero(m).(map[string]any)
	return pruned
}

func pruneZero(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if p := pruneZero(e); p == nil {
				delete(t, k)
			} else {
				t[k] = p
			}
		}
		if len(t) == 0 {
			return nil
		}
		return t
	case []any:
		if len(t) == 0 {
			return nil
		}
		for i, e := range t {
			t[i] = pruneZero(e) // keep positions; a zero item stays as null
		}
		return t
	case string:
		if t == "" {
			return nil
		}
	case float64:
		if t == 0 {
			return nil
		}
	case bool:
		if !t {
			return nil
		}
	}
	return v
}

// TestOpenShiftClientsReadOurJSON decodes fully populated objects of ours
// with openshift/api's types: every field OpenShift knows comes through
// with its value, so a misspelled JSON name or a changed shape fails.
func TestOpenShiftClientsReadOurJSON(t *testing.T) {
	cases := map[string]struct{ ours, theirs func() any }{
		"Build":           {func() any { return &buildv1.Build{} }, func() any { return &openshiftbuildv1.Build{} }},
		"BuildList":       {func() any { return &buildv1.BuildList{} }, func() any { return &openshiftbuildv1.BuildList{} }},
		"BuildConfig":     {func() any { return &buildv1.BuildConfig{} }, func() any { return &openshiftbuildv1.BuildConfig{} }},
		"BuildConfigList": {func() any { return &buildv1.BuildConfigList{} }, func() any { return &openshiftbuildv1.BuildConfigList{} }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for seed := int64(0); seed < 20; seed++ {
				g := NewWithT(t)
				ours := tc.ours()
				fillerFor(seed).Fill(ours)
				raw, err := json.Marshal(ours)
				g.Expect(err).NotTo(HaveOccurred())

				theirs := tc.theirs()
				g.Expect(sigsjson.UnmarshalCaseSensitivePreserveInts(raw, theirs)).To(Succeed())

				want := toMap(g, ours)
				forEachItem(want, func(o map[string]any) {
					for _, p := range extensionPaths {
						deletePath(o, p)
					}
				})
				// An object left empty by the deletions is left out, as
				// OpenShift's side leaves it.
				want, _ = pruneZero(want).(map[string]any)
				got := toMap(g, theirs)
				wantJSON, _ := json.Marshal(want)
				gotJSON, _ := json.Marshal(got)
				g.Expect(gotJSON).To(MatchJSON(wantJSON), "seed %d: openshift/api lost or changed a field", seed)
			}
		})
	}
}

// TestWeReadOpenShiftJSON decodes fully populated openshift/api objects
// strictly with our types: an OpenShift field we do not have is an unknown
// field, and every value must come back out unchanged. (Even the fields
// archway refuses are there, so that the refusal names them.)
func TestWeReadOpenShiftJSON(t *testing.T) {
	cases := map[string]struct {
		theirs func() any
		ours   func() any
	}{
		"Build":       {theirs: func() any { return &openshiftbuildv1.Build{} }, ours: func() any { return &buildv1.Build{} }},
		"BuildConfig": {theirs: func() any { return &openshiftbuildv1.BuildConfig{} }, ours: func() any { return &buildv1.BuildConfig{} }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for seed := int64(0); seed < 20; seed++ {
				g := NewWithT(t)
				theirs := tc.theirs()
				fillerFor(seed).Fill(theirs)
				raw, err := json.Marshal(theirs)
				g.Expect(err).NotTo(HaveOccurred())

				ours := tc.ours()
				g.Expect(strictUnmarshal(raw, ours)).To(Succeed(), "seed %d: an OpenShift field archway does not have", seed)
				wantJSON, _ := json.Marshal(toMap(g, theirs))
				gotJSON, _ := json.Marshal(toMap(g, ours))
				g.Expect(gotJSON).To(MatchJSON(wantJSON), "seed %d: a value did not come through", seed)
			}
		})
	}
}
