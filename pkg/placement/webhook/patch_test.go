package webhook

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

func TestGatePatch(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{
			name: "labels and gates absent",
			raw:  `{"metadata":{"name":"p"},"spec":{"containers":[]}}`,
			want: `{"metadata":{"labels":{"multiarch.openshift.io/scheduling-gate":"gated"},"name":"p"},"spec":{"containers":[],"schedulingGates":[{"name":"multiarch.openshift.io/scheduling-gate"}]}}`,
		},
		{
			name: "labels and gates present",
			raw:  `{"metadata":{"labels":{"app":"web"}},"spec":{"schedulingGates":[{"name":"other"}]}}`,
			want: `{"metadata":{"labels":{"app":"web","multiarch.openshift.io/scheduling-gate":"gated"}},"spec":{"schedulingGates":[{"name":"other"},{"name":"multiarch.openshift.io/scheduling-gate"}]}}`,
		},
		{
			name: "nulls and empties",
			raw:  `{"metadata":{"labels":null},"spec":{"schedulingGates":[]}}`,
			want: `{"metadata":{"labels":{"multiarch.openshift.io/scheduling-gate":"gated"}},"spec":{"schedulingGates":[{"name":"multiarch.openshift.io/scheduling-gate"}]}}`,
		},
		{
			name: "no metadata, no spec",
			raw:  `{"kind":"Pod"}`,
			want: `{"kind":"Pod","metadata":{"labels":{"multiarch.openshift.io/scheduling-gate":"gated"}},"spec":{"schedulingGates":[{"name":"multiarch.openshift.io/scheduling-gate"}]}}`,
		},
		{
			name: "a user's value of our label is overwritten",
			raw:  `{"metadata":{"labels":{"multiarch.openshift.io/scheduling-gate":"removed"}},"spec":{}}`,
			want: `{"metadata":{"labels":{"multiarch.openshift.io/scheduling-gate":"gated"}},"spec":{"schedulingGates":[{"name":"multiarch.openshift.io/scheduling-gate"}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := gatePatch([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(ops)
			patch, err := jsonpatch.DecodePatch(data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := patch.Apply([]byte(tt.raw))
			if err != nil {
				t.Fatalf("applying %s: %v", data, err)
			}
			if !jsonpatch.Equal(got, []byte(tt.want)) {
				t.Errorf("patched pod\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	if _, err := gatePatch([]byte(`[`)); err == nil {
		t.Error("want an error for broken JSON")
	}
}
