package main

import (
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}

// A tiny install: one Deployment serving one webhook through its Service.
const installYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: hook, namespace: sys, labels: {app: hook}}
spec:
  selector: {matchLabels: {app: hook}}
  template:
    metadata: {labels: {app: hook}}
    spec:
      serviceAccountName: hook
      containers:
      - name: hook
        image: example.com/hook@sha256:0000000000000000000000000000000000000000000000000000000000000000
        args: [--cert-management=external, --webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: hook, namespace: sys}
---
apiVersion: v1
kind: Service
metadata: {name: hook, namespace: sys}
spec:
  selector: {app: hook}
  ports: [{name: webhook, port: 443, targetPort: webhook}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: hook}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: hook}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hook}
subjects: [{kind: ServiceAccount, name: hook, namespace: sys}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: hook}
webhooks:
- name: widgets.example.com
  admissionReviewVersions: [v1]
  clientConfig: {service: {name: hook, namespace: sys, path: /validate, port: 443}}
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 5
  rules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets], scope: Namespaced}]`

var widgetCRD = &apiextensionsv1.CustomResourceDefinition{
	Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "example.com",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type:        "object",
				Description: "A Widget.\n\nMore text.",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer", Minimum: ptrFloat(1)}}},
				},
			}},
		}},
	},
}

func ptrFloat(f float64) *float64 { return &f }

func init() { widgetCRD.Name = "widgets.example.com" }

const widgetExample = `apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec: {size: 2}`

func assemble(t *testing.T, install, examples string) (*Bundle, error) {
	t.Helper()
	return Assemble(Input{
		Namespace: "sys",
		Objects:   objects(t, install),
		CRDs:      []*apiextensionsv1.CustomResourceDefinition{widgetCRD},
		Examples:  objects(t, examples),
	}, Meta{Version: semver.MustParse("1.0.0"), Package: "p", Channel: "alpha"})
}

// TestWebhookDefinition: a webhook OLM can keep as it is, of a Deployment
// that reads OLM's certificate, becomes a webhook definition with the
// manifests' fields; the component's service account and binding become
// its cluster permissions.
func TestWebhookDefinition(t *testing.T) {
	b, err := assemble(t, installYAML, widgetExample)
	if err != nil {
		t.Fatal(err)
	}
	defs := b.CSV.Spec.WebhookDefinitions
	if len(defs) != 1 {
		t.Fatalf("%d webhook definitions, want 1", len(defs))
	}
	d := defs[0]
	if d.GenerateName != "widgets.example.com" || d.DeploymentName != "hook" || d.ContainerPort != 443 ||
		d.TargetPort == nil || d.TargetPort.String() != "webhook" || d.WebhookPath == nil || *d.WebhookPath != "/validate" ||
		string(*d.FailurePolicy) != "Fail" || string(*d.SideEffects) != "None" || *d.TimeoutSeconds != 5 ||
		len(d.Rules) != 1 || d.Rules[0].Resources[0] != "widgets" || d.AdmissionReviewVersions[0] != "v1" {
		t.Errorf("webhook definition %+v", d)
	}
	if len(b.Cluster) != 0 {
		t.Errorf("cluster.yaml holds %d objects, want none", len(b.Cluster))
	}
	cp := b.CSV.Spec.InstallStrategy.StrategySpec.ClusterPermissions
	if len(cp) != 1 || cp[0].ServiceAccountName != "hook" || cp[0].Rules[0].Resources[0] != "pods" {
		t.Errorf("clusterPermissions %+v", cp)
	}
	for _, u := range b.Extra {
		if u.GetKind() == "ServiceAccount" || u.GetKind() == "ClusterRoleBinding" || u.GetKind() == "ClusterRole" {
			t.Errorf("%s is in the bundle besides the CSV's permissions", describe(u))
		}
	}
	if got := b.CSV.Spec.CustomResourceDefinitions.Owned; len(got) != 1 || got[0].Description != "A Widget." {
		t.Errorf("owned %+v", got)
	}
}

// TestWebhookOLMCannotKeep: a namespaceSelector or matchConditions make
// the Deployment keep its own certificate and its configuration go to
// cluster.yaml, unchanged, with the reason; a Deployment set up for OLM's
// certificate then is refused, since OLM would mount none.
func TestWebhookOLMCannotKeep(t *testing.T) {
	for name, extra := range map[string]string{
		"namespaceSelector": "\n  namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]}",
		"matchConditions":   "\n  matchConditions: [{name: c, expression: 'true'}]",
	} {
		t.Run(name, func(t *testing.T) {
			internal := strings.Replace(installYAML, "[--cert-management=external, --webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs]", "[--cert-management=internal]", 1)
			b, err := assemble(t, internal+extra, widgetExample)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.CSV.Spec.WebhookDefinitions) != 0 || len(b.Cluster) != 1 || b.Cluster[0].GetKind() != "ValidatingWebhookConfiguration" {
				t.Fatalf("%d definitions, cluster.yaml %d objects", len(b.CSV.Spec.WebhookDefinitions), len(b.Cluster))
			}
			if !strings.Contains(strings.Join(b.Notes, "\n"), name) {
				t.Errorf("no note names %s: %q", name, b.Notes)
			}
			_, err = assemble(t, installYAML+extra, widgetExample)
			if err == nil || !strings.Contains(err.Error(), "OLM does not manage its webhooks") {
				t.Errorf("a Deployment reading OLM's certificate with webhooks OLM cannot keep: %v", err)
			}
		})
	}
}

// TestRefused: what the generator cannot place is an error naming it.
func TestRefused(t *testing.T) {
	for name, c := range map[string]struct{ install, examples, want string }{
		"unknown kind": {installYAML + "\n---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}", widgetExample,
			"does not know how OLM installs a Gadget"},
		"other namespace": {installYAML + "\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: other}", widgetExample,
			"ConfigMap other/c is in namespace other"},
		"mixed binding": {strings.Replace(installYAML, "subjects: [{kind: ServiceAccount, name: hook, namespace: sys}]",
			"subjects: [{kind: ServiceAccount, name: hook, namespace: sys}, {kind: Group, name: devs, apiGroup: rbac.authorization.k8s.io}]", 1),
			widgetExample, "and to other subjects"},
		"no example":      {installYAML, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}", "no example of Widget"},
		"unknown field":   {installYAML, strings.Replace(widgetExample, "size: 2", "size: 2, colour: red", 1), "unknown fields spec.colour"},
		"invalid example": {installYAML, strings.Replace(widgetExample, "size: 2", "size: 0", 1), "spec.size"},
		"CRD in install": {installYAML + "\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}", widgetExample,
			"takes its CRDs from manifests/crd"},
		"webhook without service": {installYAML + "\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: m}\nwebhooks:\n- name: m.example.com\n  admissionReviewVersions: [v1]\n  sideEffects: None\n  clientConfig: {service: {name: gone, namespace: sys}}", widgetExample,
			"its Service gone is not in the install"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := assemble(t, c.install, c.examples)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	for v, ok := range map[string]bool{
		"v0.1.0": true, "v1.2.3-rc.1": true, "v1.0.0+build.5": true,
		"0.1.0": false, "v1.2": false, "v01.2.3": false, "latest": false, "": false, "v1.2.3 ": false,
	} {
		if _, err := ParseVersion(v); (err == nil) != ok {
			t.Errorf("ParseVersion(%q): %v", v, err)
		}
	}
}
