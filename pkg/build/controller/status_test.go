package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func managed(manager string, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, Subresource: "status",
		FieldsV1: metav1.NewFieldsV1(fields)}
}

// applied decodes the status of an apply body.
func applied(t *testing.T, b *buildv1.Build, next buildv1.BuildStatus, plan Plan) map[string]any {
	t.Helper()
	ac, err := StatusApply(b, next, plan)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ac)
	if err != nil {
		t.Fatal(err)
	}
	obj := unstructured.Unstructured{Object: u}
	if obj.GetResourceVersion() != b.ResourceVersion || obj.GetName() != b.Name || obj.GetKind() != "Build" {
		t.Fatalf("apply body metadata %v", u["metadata"])
	}
	return u["status"].(map[string]any)
}

func TestStatusApplyTouchesOnlyTheControllersFields(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name        string
		build       *buildv1.Build
		plan        Plan
		wantEntries []map[string]any
		check       func(t *testing.T, status map[string]any)
	}{
		{
			name:  "resolution writes every entry New with its pod name",
			build: makeBuild("app").obj(),
			plan:  ResolutionPlan(makeBuild("app").obj(), Resolution{Platforms: []string{amd, arm}}, now),
			wantEntries: []map[string]any{
				{"platform": amd, "phase": "New", "podName": podAmd},
				{"platform": arm, "phase": "New", "podName": podArm},
			},
			check: func(t *testing.T, st map[string]any) {
				if st["phase"] != "New" || st["platformsSummary"] != "0/2" {
					t.Errorf("status %v", st)
				}
			},
		},
		{
			name: "a builder's entry is left out; owned fields are kept at their values",
			build: func() *buildv1.Build {
				b := makeBuild("app").phase(runningP).obj()
				b.Status.Platforms = []buildv1.BuildStatusPlatform{
					{Platform: amd, Phase: runningP, PodName: podAmd, Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: "sha256:x"}},
					{Platform: arm, Phase: completeP, PodName: podArm},
				}
				b.ManagedFields = []metav1.ManagedFieldsEntry{managed(FieldManager, `{"f:status":{"f:platforms":{
					"k:{\"platform\":\"linux/amd64\"}":{"f:platform":{},"f:podName":{}},
					"k:{\"platform\":\"linux/arm64\"}":{"f:platform":{},"f:podName":{}}}}}`)}
				return b
			}(),
			plan: Plan{Phase: runningP},
			wantEntries: []map[string]any{
				{"platform": amd, "podName": podAmd},
				{"platform": arm, "podName": podArm},
			},
		},
		{
			name:  "a failure from a pod sets phase, reason, message and completion",
			build: makeBuild("app").phase(runningP).entry(amd, runningP, "").obj(),
			plan: Plan{Phase: runningP, Entries: map[string]EntryUpdate{amd: {Phase: failedP, Reason: buildv1.StatusReasonOutOfMemoryKilled,
				Message: "oom", PodName: podAmd, CompletionTimestamp: &now}}},
			wantEntries: []map[string]any{{"platform": amd, "phase": "Failed", "reason": "OutOfMemoryKilled", "message": "oom",
				"podName": podAmd, "completionTimestamp": now.UTC().Format(time.RFC3339)}},
		},
		{
			name: "a single platform's image becomes the build's output",
			build: func() *buildv1.Build {
				b := makeBuild("app").phase(runningP).obj()
				b.Status.Platforms = []buildv1.BuildStatusPlatform{{Platform: arm, Phase: completeP,
					OutputDockerImageReference: "registry.example.com/team/app:v1", Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: "sha256:abc"}}}
				return b
			}(),
			plan: Plan{Phase: completeP, CopyOutputFrom: arm},
			check: func(t *testing.T, st map[string]any) {
				if st["outputDockerImageReference"] != "registry.example.com/team/app:v1" ||
					st["output"].(map[string]any)["to"].(map[string]any)["imageDigest"] != "sha256:abc" {
					t.Errorf("output not copied: %v", st)
				}
				if _, ok := st["platforms"]; ok {
					t.Errorf("the builder's entry was applied: %v", st["platforms"])
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.build.ResourceVersion = "42"
			platforms := []string{}
			for _, e := range tt.build.Status.Platforms {
				platforms = append(platforms, e.Platform)
			}
			for p := range tt.plan.Entries {
				platforms = append(platforms, p)
			}
			next := NextStatus(tt.build, sets.List(sets.New(platforms...)), tt.plan, now)
			st := applied(t, tt.build, next, tt.plan)
			var gotEntries []map[string]any
			if raw, ok := st["platforms"]; ok {
				data, _ := json.Marshal(raw)
				_ = json.Unmarshal(data, &gotEntries)
			}
			if tt.wantEntries != nil {
				if diff := cmp.Diff(tt.wantEntries, gotEntries); diff != "" {
					t.Errorf("applied entries (-want +got):\n%s", diff)
				}
			}
			if tt.check != nil {
				tt.check(t, st)
			}
		})
	}
}

func TestNextStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(92 * time.Second))
	b := makeBuild("app").noOutput().phase(pendingP).obj()
	b.Status.Conditions = []buildv1.BuildCondition{{Type: "Pending", Status: corev1.ConditionTrue}}
	running := NextStatus(b, []string{amd}, Plan{Phase: runningP}, t0)
	if running.StartTimestamp == nil || !running.StartTimestamp.Equal(&t0) {
		t.Errorf("start %v, want %v", running.StartTimestamp, t0)
	}
	b.Status = running
	done := NextStatus(b, []string{amd}, Plan{Phase: completeP, Entries: map[string]EntryUpdate{}}, t1)
	if done.Duration != 92*time.Second || done.DurationSummary != "1m32s" || !done.CompletionTimestamp.Equal(&t1) {
		t.Errorf("duration %v %q completion %v", done.Duration, done.DurationSummary, done.CompletionTimestamp)
	}
	conds := map[buildv1.BuildConditionType]corev1.ConditionStatus{}
	for _, c := range done.Conditions {
		conds[c.Type] = c.Status
	}
	want := map[buildv1.BuildConditionType]corev1.ConditionStatus{"Pending": "False", "Running": "False", "Complete": "True", "NoOutput": "True"}
	if diff := cmp.Diff(want, conds); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	// Deciding the same again changes nothing: no write, no event.
	b.Status = done
	again := NextStatus(b, []string{amd}, Plan{Phase: completeP}, metav1.NewTime(t1.Add(time.Minute)))
	if diff := cmp.Diff(done, again); diff != "" {
		t.Errorf("a second identical decision changed the status (-first +second):\n%s", diff)
	}
}
