package openshiftapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServedByOpenShift(t *testing.T) {
	res := func(names ...string) []metav1.APIResource {
		var out []metav1.APIResource
		for _, n := range names {
			out = append(out, metav1.APIResource{Name: n})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []metav1.APIResource
		want bool
	}{
		{"archway's CRDs", res("builds", "builds/status", "buildconfigs", "buildconfigs/status"), false},
		{"nothing", nil, false},
		// What openshift-apiserver lists for build.openshift.io/v1.
		{"OpenShift's API", res("buildconfigs", "buildconfigs/instantiate", "buildconfigs/instantiatebinary", "buildconfigs/webhooks",
			"builds", "builds/clone", "builds/details", "builds/log"), true},
	} {
		if got := ServedByOpenShift(tc.in); got != tc.want {
			t.Errorf("%s: ServedByOpenShift = %v, want %v", tc.name, got, tc.want)
		}
	}
}
