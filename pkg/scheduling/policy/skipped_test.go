package policy

import (
	"testing"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

func TestFormatSkips(t *testing.T) {
	outcomes := []Outcome{
		{Policy: pol("a", 2, kupidv1alpha1.SchedulingCriteria{}), Kept: []string{"nodeSelector[example.com/disk]", "nodeName"}},
		{Policy: pol("b", 1, kupidv1alpha1.SchedulingCriteria{}), Changed: true},
		{Policy: cpol("c", 0, kupidv1alpha1.SchedulingCriteria{}), Kept: []string{"schedulerName"}},
	}
	want := "PodSchedulingPolicy/ns/a: nodeSelector[example.com/disk], nodeName; ClusterPodSchedulingPolicy/c: schedulerName"
	if got := formatSkips(skips(outcomes)); got != want {
		t.Errorf("formatSkips = %q, want %q", got, want)
	}
	if got := formatSkips(skips(outcomes[1:2])); got != "" {
		t.Errorf("nothing skipped: %q, want empty (the annotation removed)", got)
	}
	for part, want := range map[string]string{"nodeSelector[example.com/disk]": "nodeSelector", "nodeName": "nodeName", "schedulerName": "schedulerName"} {
		if got := partKind(part); got != want {
			t.Errorf("partKind(%q) = %q, want %q", part, got, want)
		}
	}
}

func TestAnnotationsPatch(t *testing.T) {
	cases := []struct {
		name    string
		current map[string]string
		set     map[string]string
		want    []string // "op path"
	}{
		{"none yet: the map is added", nil, map[string]string{"a/b": "1", "c": ""}, []string{"add /metadata/annotations"}},
		{"some: keys added, escaped", map[string]string{"x": "y"}, map[string]string{"a/b": "1"}, []string{"add /metadata/annotations/a~1b"}},
		{"the same: nothing", map[string]string{"a/b": "1"}, map[string]string{"a/b": "1"}, nil},
		{"empty value: removed when there", map[string]string{"a/b": "1"}, map[string]string{"a/b": "", "c": ""}, []string{"remove /metadata/annotations/a~1b"}},
	}
	for _, tc := range cases {
		var got []string
		for _, op := range annotationsPatch("/metadata/annotations", tc.current, tc.set) {
			got = append(got, op.Operation+" "+op.Path)
		}
		if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
