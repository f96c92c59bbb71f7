package custombuilds

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// buildJSON is a build.openshift.io/v1 object of kind with the strategy
// given as JSON.
func buildJSON(kind, strategy string) []byte {
	return []byte(`{"apiVersion":"build.openshift.io/v1","kind":"` + kind + `","metadata":{"name":"b","namespace":"team"},` +
		`"spec":{"source":{"type":"Dockerfile","dockerfile":"FROM scratch"},"strategy":` + strategy + `}}`)
}

func customJSON(image string) string {
	return `{"type":"Custom","customStrategy":{"from":{"kind":"DockerImage","name":"` + image + `"}}}`
}

func request(op admissionv1.Operation, kind string, obj, old []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op,
		Kind:      metav1.GroupVersionKind{Group: "build.openshift.io", Version: "v1", Kind: kind},
		Object:    runtime.RawExtension{Raw: obj},
		OldObject: runtime.RawExtension{Raw: old},
	}}
}

func TestWebhook(t *testing.T) {
	evil := customJSON("quay.io/evil/builder:1")
	images := func(context.Context) (string, error) { return archway, nil }
	for _, tt := range []struct {
		name   string
		req    admission.Request
		images func(context.Context) (string, error)
		refuse string // "" admits
	}{
		{"a Build of archway's image", request(admissionv1.Create, "Build", buildJSON("Build", customJSON(archway)), nil), images, ""},
		{"a BuildConfig of another image", request(admissionv1.Create, "BuildConfig", buildJSON("BuildConfig", evil), nil), images, "not DockerImage quay.io/evil/builder:1"},
		{"a Docker Build, the ConfigMap unreadable", request(admissionv1.Create, "Build", buildJSON("Build", `{"type":"Docker","dockerStrategy":{}}`), nil),
			func(context.Context) (string, error) { return "", errors.New("down") }, ""},
		{"a custom Build, the ConfigMap unreadable", request(admissionv1.Create, "Build", buildJSON("Build", customJSON(archway)), nil),
			func(context.Context) (string, error) { return "", errors.New("down") }, "reading ConfigMap " + cm + ": down"},
		{"an update keeping another image", request(admissionv1.Update, "Build", buildJSON("Build", evil), buildJSON("Build", evil)), images, ""},
		{"an update to another image", request(admissionv1.Update, "BuildConfig", buildJSON("BuildConfig", evil), buildJSON("BuildConfig", customJSON(archway))), images, "not DockerImage quay.io/evil"},
		{"an update without the old object", request(admissionv1.Update, "Build", buildJSON("Build", customJSON(archway)), nil), images, "the request has no old"},
		// OpenShift's API reads JSON case-sensitively: a key of another
		// case is no field to it, nor to the webhook.
		{"a key of another case", request(admissionv1.Create, "Build", buildJSON("Build",
			`{"type":"Custom","customStrategy":{"from":{"kind":"DockerImage","name":"`+archway+`"},"ExposeDockerSocket":true}}`), nil), images, ""},
		{"a strategy of another case", request(admissionv1.Create, "Build", buildJSON("Build",
			`{"type":"Custom","CustomStrategy":{"from":{"kind":"DockerImage","name":"`+archway+`"}}}`), nil), images, "not  "},
		{"malformed JSON", request(admissionv1.Create, "Build", []byte(`{"spec":`), nil), images, "decoding the new Build"},
		{"another kind", request(admissionv1.Create, "Pod", []byte(`{}`), nil), images, "unexpected kind Pod"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &Webhook{ConfigMap: cm, Images: tt.images}
			resp := w.Handle(context.Background(), tt.req)
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			switch {
			case tt.refuse == "" && !resp.Allowed:
				t.Errorf("refused: %s", msg)
			case tt.refuse != "" && resp.Allowed:
				t.Errorf("admitted, want refused with %q", tt.refuse)
			case tt.refuse != "" && !strings.Contains(msg, tt.refuse):
				t.Errorf("refused with %q, want %q", msg, tt.refuse)
			}
		})
	}
}
