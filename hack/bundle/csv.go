package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/platform"
)

// Input is what a CSV is made from: the install built by kustomize, the
// CRDs, and the example objects alm-examples is chosen from.
type Input struct {
	// Namespace is the install's namespace, where OLM must install it
	// (the OperatorGroup's namespace).
	Namespace string
	// Objects is the install (e.g. kustomize build manifests/default),
	// without CRDs.
	Objects []*unstructured.Unstructured
	// CRDs are the CRDs the bundle owns (kustomize build manifests/crd).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Examples are candidate examples, the first of each owned kind wins;
	// the install's own custom resources come before them.
	Examples []*unstructured.Unstructured
}

// Meta is the package's description.
type Meta struct {
	Version        semver.Version
	Package        string
	Channel        string
	MinKubeVersion string
	// Platforms are the platforms the images hold (operatorframework.io
	// arch and os labels).
	Platforms []string
	// RequireDigests refuses an image named by tag (a release).
	RequireDigests bool
	// Earlier are the releases before Version (hack/releases), oldest
	// first: OLM's upgrade edges into this one (upgradeEdges).
	Earlier []semver.Version
}

// Bundle is what the generator writes.
type Bundle struct {
	CSV  *operatorsv1alpha1.ClusterServiceVersion
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Extra are the bundle's other manifests: kinds OLM installs from a
	// bundle (Services, ConfigMaps, Secrets, unbound roles, ...).
	Extra []*unstructured.Unstructured
	// Cluster are the objects OLM cannot install from a bundle, which the
	// administrator applies after the CSV succeeded (cluster.yaml).
	Cluster []*unstructured.Unstructured
	// Notes say what the bundle does differently from the kustomize
	// install, and why, one line each.
	Notes []string
}

// replicasAnnotation is placement.ReplicasAnnotation (not imported: the
// placement package brings the registry clients), which the bundle moves
// onto the pod template of the placement operands' Deployments.
const replicasAnnotation = "placement.archway.dev/replicas"

// OLM's webhook certificate: where OLM mounts tls.crt and tls.key into a
// Deployment named by a webhook definition.
const olmWebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"

// extraKinds are the kinds a registry+v1 bundle may carry besides the CSV
// and CRDs, which OLM creates in the operator's namespace (namespaced
// kinds) or in the cluster.
var extraKinds = map[string]bool{
	"ConfigMap": true, "Secret": true, "Service": true, "ServiceAccount": true,
	"Role": true, "RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"PodDisruptionBudget": true, "PriorityClass": true, "VerticalPodAutoscaler": true,
	"ServiceMonitor": true, "PrometheusRule": true,
	"ConsoleYAMLSample": true, "ConsoleQuickStart": true, "ConsoleCLIDownload": true, "ConsoleLink": true,
}

// clusterKinds are the kinds a bundle cannot carry, which the
// administrator applies after the install (cluster.yaml), each with the
// reason. Webhook configurations are decided per Deployment
// (webhookDefinitions) and archway's own configs are custom resources of
// the owned CRDs, which OLM leaves to the administrator as it does for
// every operator.
var clusterKinds = map[string]string{
	"ValidatingAdmissionPolicy":        "OLM's bundle format has no ValidatingAdmissionPolicy",
	"ValidatingAdmissionPolicyBinding": "OLM's bundle format has no ValidatingAdmissionPolicyBinding",
	"MutatingAdmissionPolicy":          "OLM's bundle format has no MutatingAdmissionPolicy",
	"MutatingAdmissionPolicyBinding":   "OLM's bundle format has no MutatingAdmissionPolicyBinding",
	"SecurityContextConstraints":       "OLM's bundle format has no SecurityContextConstraints",
	// OLM's apiservicedefinitions would mount OLM's certificate; archway's
	// components make their own and inject the CA into what they serve.
	"APIService": "its Deployment makes its own serving certificate and injects the CA, as in the kustomize install",
}

// Assemble makes the bundle from in. It refuses what it cannot place: a
// kind neither OLM nor the administrator's step takes, a namespaced object
// outside in.Namespace, a binding that mixes the components' service
// accounts with other subjects, a webhook whose Service or Deployment is
// missing, a Deployment OLM would give a webhook certificate it does not
// read, an owned kind without an example.
func Assemble(in Input, meta Meta) (*Bundle, error) {
	if in.Namespace == "" {
		return nil, errors.New("no namespace")
	}
	b := &Bundle{}
	owned := map[string]*apiextensionsv1.CustomResourceDefinition{} // group/kind
	for _, crd := range in.CRDs {
		owned[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = crd
	}
	isOwned := func(u *unstructured.Unstructured) bool {
		_, ok := owned[u.GroupVersionKind().Group+"/"+u.GetKind()]
		return ok
	}

	var (
		deployments []*appsv1.Deployment
		services    []*corev1.Service
		bindings    []*unstructured.Unstructured
		roles       = map[string]*unstructured.Unstructured{} // Kind/name
		webhookCfgs []*unstructured.Unstructured
		ownObjects  []*unstructured.Unstructured
	)
	for _, u := range in.Objects {
		where := describe(u)
		if ns := u.GetNamespace(); ns != "" && ns != in.Namespace {
			return nil, fmt.Errorf("%s is in namespace %s: OLM installs a bundle's objects only in the operator's namespace %s", where, ns, in.Namespace)
		}
		switch kind := u.GetKind(); {
		case kind == "CustomResourceDefinition":
			return nil, fmt.Errorf("%s is in the install: the bundle takes its CRDs from manifests/crd (--crds), leave ../crd out of the install", where)
		case kind == "Namespace":
			if u.GetName() != in.Namespace {
				return nil, fmt.Errorf("%s: the install creates a second namespace, which OLM cannot (it installs into the OperatorGroup's namespace only)", where)
			}
			b.Notes = append(b.Notes, fmt.Sprintf("Namespace %s: not in the bundle; create it and install the operator there (OLM installs into the OperatorGroup's namespace)", in.Namespace))
		case kind == "Deployment":
			d := &appsv1.Deployment{}
			if err := fromUnstructured(u, d); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			deployments = append(deployments, d)
		case kind == "Service":
			s := &corev1.Service{}
			if err := fromUnstructured(u, s); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			services = append(services, s)
			b.Extra = append(b.Extra, u)
		case kind == "RoleBinding" || kind == "ClusterRoleBinding":
			bindings = append(bindings, u)
		case kind == "Role" || kind == "ClusterRole":
			roles[kind+"/"+u.GetName()] = u
		case kind == "ValidatingWebhookConfiguration" || kind == "MutatingWebhookConfiguration":
			webhookCfgs = append(webhookCfgs, u)
		case isOwned(u):
			ownObjects = append(ownObjects, u)
		case clusterKinds[kind] != "":
			b.Cluster = append(b.Cluster, u)
			b.Notes = append(b.Notes, fmt.Sprintf("%s: applied by the administrator (cluster.yaml): %s", where, clusterKinds[kind]))
		case extraKinds[kind]:
			// ServiceAccounts of the Deployments are taken out below.
			b.Extra = append(b.Extra, u)
		default:
			return nil, fmt.Errorf("%s: the generator does not know how OLM installs a %s: add the kind to extraKinds (a kind OLM takes from a bundle) or clusterKinds (with the reason the administrator applies it) in hack/bundle/csv.go", where, kind)
		}
	}
	if len(deployments) == 0 {
		return nil, errors.New("the install has no Deployment")
	}

	// The components' service accounts: OLM creates them and binds their
	// rules, so their ServiceAccounts and bindings are not in the bundle.
	accounts := map[string]bool{}
	for _, d := range deployments {
		sa := d.Spec.Template.Spec.ServiceAccountName
		if sa == "" {
			return nil, fmt.Errorf("the Deployment %s runs as the default service account: OLM binds the CSV's permissions to a named one", d.Name)
		}
		accounts[sa] = true
	}
	b.Extra = slices.DeleteFunc(b.Extra, func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "ServiceAccount" && accounts[u.GetName()]
	})

	perms, clusterPerms, usedRoles, err := permissions(in.Namespace, bindings, roles, accounts, b)
	if err != nil {
		return nil, err
	}
	// Roles no consumed binding needs stay objects (e.g. the ClusterRoles
	// a component binds at run time); so do bindings of other subjects.
	for _, key := range sortedKeys(roles) {
		if !usedRoles[key] {
			b.Extra = append(b.Extra, roles[key])
		}
	}

	conversions, err := conversionWebhooks(in.Namespace, in.CRDs, webhookCfgs, services, deployments, b)
	if err != nil {
		return nil, err
	}
	webhooks, clusterCfgs, managed, err := webhookDefinitions(in.Namespace, webhookCfgs, services, deployments, b)
	if err != nil {
		return nil, err
	}
	for _, c := range conversions {
		managed[c.DeploymentName] = true
	}
	webhooks = append(webhooks, conversions...)
	b.Cluster = append(clusterCfgs, b.Cluster...)

	var specs []operatorsv1alpha1.StrategyDeploymentSpec
	for _, d := range deployments {
		if err := checkCertMode(d, managed[d.Name]); err != nil {
			return nil, err
		}
		spec := *d.Spec.DeepCopy()
		for _, k := range sortedKeys(d.Annotations) {
			if k == replicasAnnotation {
				// The placement operator reads it from the pod template
				// too: the bundle's operands run the kustomize install's
				// replicas.
				if spec.Template.Annotations == nil {
					spec.Template.Annotations = map[string]string{}
				}
				spec.Template.Annotations[k] = d.Annotations[k]
				continue
			}
			b.Notes = append(b.Notes, fmt.Sprintf("Deployment %s: its annotation %s=%s is not in the CSV (a CSV's deployment has labels and a spec only)", d.Name, k, d.Annotations[k]))
		}
		specs = append(specs, operatorsv1alpha1.StrategyDeploymentSpec{
			Name:  d.Name,
			Spec:  spec,
			Label: labels.Set(d.Labels),
		})
	}

	// The install's own configs (placement on, protection's modes) are
	// the administrator's to create, as with any operator; they are the
	// first examples of their kinds.
	for _, u := range ownObjects {
		b.Cluster = append(b.Cluster, u)
		b.Notes = append(b.Notes, fmt.Sprintf("%s: the kustomize install creates it; with OLM the administrator does (cluster.yaml)", describe(u)))
	}

	crds, examples, err := ownedCRDs(in.CRDs, append(slices.Clone(ownObjects), in.Examples...))
	if err != nil {
		return nil, err
	}
	almExamples, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return nil, err
	}

	images, err := relatedImages(deployments, in.Objects, meta.RequireDigests)
	if err != nil {
		return nil, err
	}

	replaces, skipRange := upgradeEdges(meta)
	csv := &operatorsv1alpha1.ClusterServiceVersion{
		TypeMeta: metav1.TypeMeta{APIVersion: operatorsv1alpha1.SchemeGroupVersion.String(), Kind: operatorsv1alpha1.ClusterServiceVersionKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: csvName(meta.Package, meta.Version),
			Annotations: map[string]string{
				"alm-examples":   string(almExamples),
				"capabilities":   "Basic Install",
				"categories":     "Developer Tools",
				"containerImage": images[0].Image,
				"operatorframework.io/suggested-namespace": in.Namespace,
				"repository":  "https://github.com/archway-build/archway",
				"description": "Multi-architecture builds, arch-aware pod placement and scheduling policy.",
			},
			Labels: archLabels(meta.Platforms),
		},
		Spec: operatorsv1alpha1.ClusterServiceVersionSpec{
			DisplayName: "archway",
			Description: description,
			Version:     versionOf(meta.Version),
			Replaces:    replaces,
			Maturity:    "alpha",
			Keywords:    []string{"multi-arch", "builds", "BuildConfig", "scheduling", "placement"},
			Provider:    operatorsv1alpha1.AppLink{Name: "archway", URL: "https://github.com/archway-build/archway"},
			Links:       []operatorsv1alpha1.AppLink{{Name: "Documentation", URL: "https://github.com/archway-build/archway/tree/main/docs"}},
			Maintainers: []operatorsv1alpha1.Maintainer{{Name: "archway", Email: "archway@archway.dev"}},
			// Every component is cluster-wide: webhooks and controllers
			// for every namespace.
			InstallModes: []operatorsv1alpha1.InstallMode{
				{Type: operatorsv1alpha1.InstallModeTypeOwnNamespace, Supported: false},
				{Type: operatorsv1alpha1.InstallModeTypeSingleNamespace, Supported: false},
				{Type: operatorsv1alpha1.InstallModeTypeMultiNamespace, Supported: false},
				{Type: operatorsv1alpha1.InstallModeTypeAllNamespaces, Supported: true},
			},
			MinKubeVersion: meta.MinKubeVersion,
			InstallStrategy: operatorsv1alpha1.NamedInstallStrategy{
				StrategyName: operatorsv1alpha1.InstallStrategyNameDeployment,
				StrategySpec: operatorsv1alpha1.StrategyDetailsDeployment{
					DeploymentSpecs:    specs,
					Permissions:        perms,
					ClusterPermissions: clusterPerms,
				},
			},
			CustomResourceDefinitions: operatorsv1alpha1.CustomResourceDefinitions{Owned: crds},
			WebhookDefinitions:        webhooks,
			RelatedImages:             images,
		},
	}
	if skipRange != "" {
		csv.Annotations[operatorsv1alpha1.SkipRangeAnnotationKey] = skipRange
	}
	b.CSV = csv
	b.CRDs = in.CRDs
	return b, nil
}

// csvName is the CSV of a package's release, as OLM's replaces names it.
func csvName(pkg string, v semver.Version) string {
	return pkg + ".v" + v.String()
}

// upgradeEdges are the CSV's ways up from the earlier releases: it
// replaces the newest one (spec.replaces, OLM's chain of updates) and
// skips every one from the oldest on (olm.skipRange), so that a cluster
// on any earlier release updates to this one in one step, not through
// every release between. The first release has neither.
func upgradeEdges(meta Meta) (replaces, skipRange string) {
	if len(meta.Earlier) == 0 {
		return "", ""
	}
	oldest, newest := meta.Earlier[0], meta.Earlier[len(meta.Earlier)-1]
	return csvName(meta.Package, newest), fmt.Sprintf(">=%s <%s", oldest, meta.Version)
}

const description = `archway builds container images for every CPU architecture of a cluster
(OpenShift's build.openshift.io/v1 Builds and BuildConfigs, served as CRDs and
extended with platforms), places pods on nodes that can run their images (a
scheduling-gate webhook and a placement controller, configured by a
ClusterPodPlacementConfig), and applies scheduling policy (control-plane
protection, pod scheduling policies).

Install into the namespace archway-system with an AllNamespaces
OperatorGroup and, once OLM has installed the CRDs, apply the cluster.yaml of
the release: the webhook configurations (the webhook components become ready
once they exist), the ValidatingAdmissionPolicies and archway's configs, which
a bundle cannot carry. See docs/admin-guide/install.md.`

func versionOf(v semver.Version) version.OperatorVersion {
	return version.OperatorVersion{Version: v}
}

// describe names an object in messages.
func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// permissions turns the bindings of the components' service accounts into
// the CSV's permissions (RoleBindings: rules in the namespace) and
// clusterPermissions (ClusterRoleBindings), one entry per account, the
// rules of each role it is bound to in the install's order. Bindings of
// other subjects go into the bundle as objects. usedRoles are the roles
// only consumed bindings name.
func permissions(ns string, bindings []*unstructured.Unstructured, roles map[string]*unstructured.Unstructured, accounts map[string]bool, b *Bundle) (perms, clusterPerms []operatorsv1alpha1.StrategyDeploymentPermissions, usedRoles map[string]bool, err error) {
	rulesOf := map[string][]rbacv1.PolicyRule{}
	clusterRulesOf := map[string][]rbacv1.PolicyRule{}
	consumed := map[string]bool{}
	referenced := map[string]bool{}
	for _, u := range bindings {
		var ref rbacv1.RoleRef
		var subjects []rbacv1.Subject
		if u.GetKind() == "RoleBinding" {
			rb := &rbacv1.RoleBinding{}
			if err := fromUnstructured(u, rb); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", describe(u), err)
			}
			ref, subjects = rb.RoleRef, rb.Subjects
		} else {
			crb := &rbacv1.ClusterRoleBinding{}
			if err := fromUnstructured(u, crb); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", describe(u), err)
			}
			ref, subjects = crb.RoleRef, crb.Subjects
		}
		roleKey := ref.Kind + "/" + ref.Name
		ours := 0
		for _, s := range subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && accounts[s.Name] {
				ours++
			}
		}
		if ours == 0 {
			referenced[roleKey] = true
			b.Extra = append(b.Extra, u)
			continue
		}
		if ours != len(subjects) {
			return nil, nil, nil, fmt.Errorf("%s binds %s to the components' service accounts and to other subjects: OLM binds the accounts' rules itself; split the binding", describe(u), roleKey)
		}
		role, ok := roles[roleKey]
		if !ok {
			return nil, nil, nil, fmt.Errorf("%s binds %s, which the install does not hold", describe(u), roleKey)
		}
		if _, agg := role.Object["aggregationRule"]; agg {
			return nil, nil, nil, fmt.Errorf("%s binds the aggregated %s: a CSV's permissions list rules, not aggregations", describe(u), roleKey)
		}
		var rules []rbacv1.PolicyRule
		if ref.Kind == "Role" {
			r := &rbacv1.Role{}
			if err := fromUnstructured(role, r); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", describe(role), err)
			}
			rules = r.Rules
		} else {
			r := &rbacv1.ClusterRole{}
			if err := fromUnstructured(role, r); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", describe(role), err)
			}
			rules = r.Rules
		}
		consumed[roleKey] = true
		for _, s := range subjects {
			if u.GetKind() == "RoleBinding" {
				rulesOf[s.Name] = append(rulesOf[s.Name], rules...)
			} else {
				clusterRulesOf[s.Name] = append(clusterRulesOf[s.Name], rules...)
			}
		}
	}
	for _, sa := range sortedKeys(rulesOf) {
		perms = append(perms, operatorsv1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: rulesOf[sa]})
	}
	for _, sa := range sortedKeys(clusterRulesOf) {
		clusterPerms = append(clusterPerms, operatorsv1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: clusterRulesOf[sa]})
	}
	usedRoles = map[string]bool{}
	for k := range consumed {
		if !referenced[k] {
			usedRoles[k] = true
		}
	}
	return perms, clusterPerms, usedRoles, nil
}

// webhookRef is one webhook of the install with the Deployment serving it.
type webhookRef struct {
	cfg        *unstructured.Unstructured
	desc       operatorsv1alpha1.WebhookDescription
	deployment string
	// lost says why OLM could not keep the webhook as it is ("" when it
	// can).
	lost string
}

// webhookDefinitions resolves each webhook of the install to the
// Deployment that serves it, through its Service. OLM manages the webhooks
// of a Deployment (webhook definitions in the CSV, its certificate mounted
// by OLM) only when it can keep every one of them as the manifests have it
// and the Deployment reads OLM's certificate; otherwise the Deployment
// keeps its own certificate and the webhook configurations go to the
// administrator's step unchanged, with a note saying why. managed are the
// Deployments OLM serves webhooks of.
func webhookDefinitions(ns string, cfgs []*unstructured.Unstructured, services []*corev1.Service, deployments []*appsv1.Deployment, b *Bundle) (defs []operatorsv1alpha1.WebhookDescription, cluster []*unstructured.Unstructured, managed map[string]bool, err error) {
	var refs []webhookRef
	for _, u := range cfgs {
		one, err := webhooksOf(ns, u, services, deployments)
		if err != nil {
			return nil, nil, nil, err
		}
		refs = append(refs, one...)
	}
	canManage := map[string]bool{}
	why := map[string][]string{}
	for _, r := range refs {
		if _, seen := canManage[r.deployment]; !seen {
			canManage[r.deployment] = true
		}
		if r.lost != "" {
			canManage[r.deployment] = false
			why[r.deployment] = append(why[r.deployment], r.lost)
		}
	}
	for _, d := range deployments {
		if ok := canManage[d.Name]; ok && !readsOLMCert(d) {
			canManage[d.Name] = false
			why[d.Name] = append(why[d.Name], fmt.Sprintf("it makes its own certificate (not --cert-management=external --webhook-cert-dir=%s)", olmWebhookCertDir))
		}
	}
	managed = map[string]bool{}
	inCluster := map[*unstructured.Unstructured]bool{}
	for _, r := range refs {
		if canManage[r.deployment] {
			managed[r.deployment] = true
			defs = append(defs, r.desc)
		} else {
			inCluster[r.cfg] = true
		}
	}
	for _, d := range sortedKeys(why) {
		b.Notes = append(b.Notes, fmt.Sprintf("Deployment %s: its webhook configurations are applied by the administrator (cluster.yaml), not by OLM: %s", d, strings.Join(why[d], "; ")))
	}
	for _, u := range cfgs {
		if inCluster[u] {
			cluster = append(cluster, u)
		}
	}
	// A configuration must not be split between OLM and the
	// administrator: its webhooks are served by Deployments of one kind.
	for _, u := range cfgs {
		if !inCluster[u] {
			continue
		}
		for _, r := range refs {
			if r.cfg == u && canManage[r.deployment] {
				return nil, nil, nil, fmt.Errorf("%s holds webhooks OLM would manage (of %s) and others it cannot: split it by Deployment", describe(u), r.deployment)
			}
		}
	}
	return defs, cluster, managed, nil
}

// webhooksOf reads the webhooks of one configuration.
func webhooksOf(ns string, u *unstructured.Unstructured, services []*corev1.Service, deployments []*appsv1.Deployment) ([]webhookRef, error) {
	type common struct {
		name                    string
		clientConfig            admissionregistrationv1.WebhookClientConfig
		rules                   []admissionregistrationv1.RuleWithOperations
		failurePolicy           *admissionregistrationv1.FailurePolicyType
		matchPolicy             *admissionregistrationv1.MatchPolicyType
		namespaceSelector       *metav1.LabelSelector
		objectSelector          *metav1.LabelSelector
		sideEffects             *admissionregistrationv1.SideEffectClass
		timeoutSeconds          *int32
		admissionReviewVersions []string
		matchConditions         []admissionregistrationv1.MatchCondition
		reinvocationPolicy      *admissionregistrationv1.ReinvocationPolicyType
	}
	var hooks []common
	var typ operatorsv1alpha1.WebhookAdmissionType
	if u.GetKind() == "MutatingWebhookConfiguration" {
		typ = operatorsv1alpha1.MutatingAdmissionWebhook
		c := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := fromUnstructured(u, c); err != nil {
			return nil, fmt.Errorf("%s: %w", describe(u), err)
		}
		for _, w := range c.Webhooks {
			hooks = append(hooks, common{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions, w.ReinvocationPolicy})
		}
	} else {
		typ = operatorsv1alpha1.ValidatingAdmissionWebhook
		c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := fromUnstructured(u, c); err != nil {
			return nil, fmt.Errorf("%s: %w", describe(u), err)
		}
		for _, w := range c.Webhooks {
			hooks = append(hooks, common{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions, w.MatchConditions, nil})
		}
	}
	var out []webhookRef
	for _, w := range hooks {
		where := describe(u) + " webhook " + w.name
		svcRef := w.clientConfig.Service
		if svcRef == nil {
			return nil, fmt.Errorf("%s calls a URL: OLM serves webhooks of the bundle's Deployments only (clientConfig.service)", where)
		}
		if svcRef.Namespace != ns {
			return nil, fmt.Errorf("%s calls a Service in namespace %s, not the install's %s", where, svcRef.Namespace, ns)
		}
		deployment, port, target, err := serving(svcRef, services, deployments)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		ref := webhookRef{cfg: u, deployment: deployment, desc: operatorsv1alpha1.WebhookDescription{
			GenerateName:            w.name,
			Type:                    typ,
			DeploymentName:          deployment,
			ContainerPort:           port,
			TargetPort:              target,
			Rules:                   w.rules,
			FailurePolicy:           w.failurePolicy,
			MatchPolicy:             w.matchPolicy,
			ObjectSelector:          w.objectSelector,
			SideEffects:             w.sideEffects,
			TimeoutSeconds:          w.timeoutSeconds,
			AdmissionReviewVersions: w.admissionReviewVersions,
			ReinvocationPolicy:      w.reinvocationPolicy,
			WebhookPath:             svcRef.Path,
		}}
		var lost []string
		if sel := w.namespaceSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
			lost = append(lost, fmt.Sprintf("%s has a namespaceSelector, which OLM replaces with the OperatorGroup's (every namespace)", w.name))
		}
		if len(w.matchConditions) > 0 {
			lost = append(lost, fmt.Sprintf("%s has matchConditions, which a CSV's webhook definition cannot hold", w.name))
		}
		ref.lost = strings.Join(lost, "; ")
		out = append(out, ref)
	}
	return out, nil
}

// serving finds the Deployment a webhook's Service reaches: the Service's
// port the webhook calls (OLM's containerPort, the port of the Service it
// makes) and that port's targetPort.
func serving(ref *admissionregistrationv1.ServiceReference, services []*corev1.Service, deployments []*appsv1.Deployment) (string, int32, *intstr.IntOrString, error) {
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	var svc *corev1.Service
	for _, s := range services {
		if s.Name == ref.Name {
			svc = s
		}
	}
	if svc == nil {
		return "", 0, nil, fmt.Errorf("its Service %s is not in the install", ref.Name)
	}
	var target *intstr.IntOrString
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			t := p.TargetPort
			if t.Type == intstr.Int && t.IntVal == 0 {
				t = intstr.FromInt32(port)
			}
			target = &t
		}
	}
	if target == nil {
		return "", 0, nil, fmt.Errorf("the Service %s has no port %d", svc.Name, port)
	}
	if len(svc.Spec.Selector) == 0 {
		return "", 0, nil, fmt.Errorf("the Service %s selects no pods", svc.Name)
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var found []string
	for _, d := range deployments {
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			found = append(found, d.Name)
		}
	}
	if len(found) != 1 {
		return "", 0, nil, fmt.Errorf("the Service %s selects the pods of %d Deployments (%s): OLM's webhook definition names exactly one", svc.Name, len(found), strings.Join(found, ", "))
	}
	return found[0], port, target, nil
}

// conversionWebhooks makes a ConversionWebhook definition for each CRD
// that converts through a webhook: OLM then serves it with its own
// certificate and writes the CRD's conversion Service and CA. The
// Deployment serving it must read OLM's certificate, or its own CA would
// fight OLM's in the CRD: one that makes its own and serves no admission
// webhook is switched to OLM's (--cert-management=external
// --webhook-cert-dir=OLM's directory), with a note.
func conversionWebhooks(ns string, crds []*apiextensionsv1.CustomResourceDefinition, cfgs []*unstructured.Unstructured, services []*corev1.Service, deployments []*appsv1.Deployment, b *Bundle) ([]operatorsv1alpha1.WebhookDescription, error) {
	admission := map[string]bool{}
	for _, u := range cfgs {
		refs, err := webhooksOf(ns, u, services, deployments)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			admission[r.deployment] = true
		}
	}
	var defs []operatorsv1alpha1.WebhookDescription
	for _, crd := range crds {
		c := crd.Spec.Conversion
		if c == nil || c.Strategy != apiextensionsv1.WebhookConverter {
			continue
		}
		if c.Webhook == nil || c.Webhook.ClientConfig == nil || c.Webhook.ClientConfig.Service == nil || c.Webhook.ClientConfig.Service.Path == nil {
			return nil, fmt.Errorf("CustomResourceDefinition %s converts through a webhook that is no path of a Service: OLM serves conversion webhooks of the bundle's Deployments only", crd.Name)
		}
		svc := c.Webhook.ClientConfig.Service
		if svc.Namespace != ns {
			return nil, fmt.Errorf("CustomResourceDefinition %s converts through a Service in namespace %s, not the install's %s", crd.Name, svc.Namespace, ns)
		}
		name, port, target, err := serving(&admissionregistrationv1.ServiceReference{Namespace: svc.Namespace, Name: svc.Name, Path: svc.Path, Port: svc.Port}, services, deployments)
		if err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %s's conversion webhook: %w", crd.Name, err)
		}
		i := slices.IndexFunc(deployments, func(d *appsv1.Deployment) bool { return d.Name == name })
		if d := deployments[i]; !readsOLMCert(d) {
			if admission[name] {
				return nil, fmt.Errorf("the Deployment %s serves the conversion webhook of %s and admission webhooks, and makes its own certificate: give it --cert-management=external --webhook-cert-dir=%s", name, crd.Name, olmWebhookCertDir)
			}
			useOLMCert(d)
			b.Notes = append(b.Notes, fmt.Sprintf("Deployment %s: serves the conversion webhook of %s with OLM's certificate (--cert-management=external --webhook-cert-dir=%s); OLM writes the CRD's conversion Service and CA", name, crd.Name, olmWebhookCertDir))
		}
		none := admissionregistrationv1.SideEffectClassNone
		defs = append(defs, operatorsv1alpha1.WebhookDescription{
			GenerateName:            "conversion." + crd.Name,
			Type:                    operatorsv1alpha1.ConversionWebhook,
			DeploymentName:          name,
			ContainerPort:           port,
			TargetPort:              target,
			SideEffects:             &none,
			AdmissionReviewVersions: c.Webhook.ConversionReviewVersions,
			WebhookPath:             svc.Path,
			ConversionCRDs:          []string{crd.Name},
		})
	}
	return defs, nil
}

// useOLMCert makes d's containers that manage their certificate read
// OLM's instead.
func useOLMCert(d *appsv1.Deployment) {
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--cert-management") }) {
			continue
		}
		args := []string{}
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--cert-management") || strings.HasPrefix(a, "--webhook-cert-dir") ||
				strings.HasPrefix(a, "--webhook-cert-secret") || strings.HasPrefix(a, "--webhook-service") {
				continue
			}
			args = append(args, a)
		}
		c.Args = append(args, "--cert-management=external", "--webhook-cert-dir="+olmWebhookCertDir)
	}
}

// readsOLMCert reports whether every container of d that takes
// --cert-management reads its certificate from where OLM mounts it.
func readsOLMCert(d *appsv1.Deployment) bool {
	seen := false
	for _, c := range d.Spec.Template.Spec.Containers {
		args := strings.Join(c.Args, " ")
		if !strings.Contains(args, "--cert-management") && !strings.Contains(args, "--webhook-cert-dir") {
			continue
		}
		seen = true
		if !slices.Contains(c.Args, "--cert-management=external") || !slices.Contains(c.Args, "--webhook-cert-dir="+olmWebhookCertDir) {
			return false
		}
	}
	return seen
}

// checkCertMode refuses a Deployment set up for OLM's certificate whose
// webhooks OLM does not manage: OLM would mount no certificate into it.
func checkCertMode(d *appsv1.Deployment, managed bool) error {
	if !managed && readsOLMCert(d) {
		return fmt.Errorf("the Deployment %s reads its webhook certificate from %s, but OLM does not manage its webhooks (see the notes) and mounts none: keep --cert-management=internal", d.Name, olmWebhookCertDir)
	}
	return nil
}

// ownedCRDs lists every served version of every CRD, with the kind's
// description, and picks the first example of each served version (valid
// against its schema): OLM's validator asks for an example of every API a
// bundle provides, and the console offers each version's form.
func ownedCRDs(crds []*apiextensionsv1.CustomResourceDefinition, candidates []*unstructured.Unstructured) ([]operatorsv1alpha1.CRDDescription, []map[string]any, error) {
	var owned []operatorsv1alpha1.CRDDescription
	var examples []map[string]any
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			desc := ""
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				desc = firstParagraph(v.Schema.OpenAPIV3Schema.Description)
			}
			owned = append(owned, operatorsv1alpha1.CRDDescription{
				Name:        crd.Name,
				Version:     v.Name,
				Kind:        crd.Spec.Names.Kind,
				DisplayName: crd.Spec.Names.Kind,
				Description: desc,
			})
			example, err := exampleFor(crd, v.Name, candidates)
			if err != nil {
				return nil, nil, err
			}
			examples = append(examples, example)
		}
	}
	return owned, examples, nil
}

// exampleFor picks the first candidate of the CRD's kind at version that
// its schema admits.
func exampleFor(crd *apiextensionsv1.CustomResourceDefinition, version string, candidates []*unstructured.Unstructured) (map[string]any, error) {
	var problems []string
	for _, c := range candidates {
		gvk := c.GroupVersionKind()
		if gvk.Group != crd.Spec.Group || gvk.Version != version || gvk.Kind != crd.Spec.Names.Kind {
			continue
		}
		if err := validateExample(crd, c); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", describe(c), err))
			continue
		}
		return exampleOf(c), nil
	}
	msg := fmt.Sprintf("no example of %s %s (%s) for alm-examples: add one to examples/ (--examples)", crd.Spec.Names.Kind, version, crd.Name)
	if len(problems) > 0 {
		msg += "; refused: " + strings.Join(problems, "; ")
	}
	return nil, errors.New(msg)
}

// exampleOf is the object as an example: apiVersion, kind, name and
// labels, spec; no namespace, status or server fields.
func exampleOf(u *unstructured.Unstructured) map[string]any {
	meta := map[string]any{"name": u.GetName()}
	if l := u.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	out := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta}
	for k, v := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			out[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	return out
}

// firstParagraph is the text up to the first blank line, on one line.
func firstParagraph(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n\n")
	return strings.Join(strings.Fields(s), " ")
}

// archLabels are OLM's labels for the platforms the images hold.
func archLabels(platforms []string) map[string]string {
	out := map[string]string{}
	for _, p := range platforms {
		pl, err := platform.Parse(p)
		if err != nil {
			continue
		}
		out["operatorframework.io/arch."+pl.Architecture] = "supported"
		out["operatorframework.io/os."+pl.OS] = "supported"
	}
	return out
}

// relatedImages lists every image the bundle runs: the Deployments'
// containers and the images build-controller's configuration file names
// for build pods (which a disconnected cluster must mirror too). The
// first is the operator's own (build-controller).
func relatedImages(deployments []*appsv1.Deployment, objects []*unstructured.Unstructured, requireDigests bool) ([]operatorsv1alpha1.RelatedImage, error) {
	var out []operatorsv1alpha1.RelatedImage
	seen := map[string]bool{}
	add := func(name, image, where string) error {
		if requireDigests && !strings.Contains(image, "@sha256:") {
			return fmt.Errorf("%s names %s by tag: a release pins every image by digest (make release-manifests)", where, image)
		}
		if seen[image] {
			return nil
		}
		seen[image] = true
		out = append(out, operatorsv1alpha1.RelatedImage{Name: name, Image: image})
		return nil
	}
	for _, d := range deployments {
		for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
			if err := add(imageName(c.Image), c.Image, "Deployment "+d.Name); err != nil {
				return nil, err
			}
		}
	}
	for _, u := range objects {
		if u.GetKind() != "ConfigMap" || !strings.HasPrefix(u.GetName(), "build-controller-config") {
			continue
		}
		text, _, _ := unstructured.NestedString(u.Object, "data", "config.yaml")
		cfg, err := configv1alpha1.Parse([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", describe(u), err)
		}
		where := describe(u) + " build.builderImage"
		if err := add(imageName(cfg.Build.BuilderImage), cfg.Build.BuilderImage, where); err != nil {
			return nil, err
		}
		for _, p := range cfg.Build.PlatformBuilderImages {
			if err := add(imageName(p.Image)+"-"+strings.NewReplacer("/", "-").Replace(p.Platform), p.Image, where); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the install names no image")
	}
	return out, nil
}

// imageName is the last path element of an image's repository.
func imageName(image string) string {
	repo := image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, "/"); i >= 0 {
		repo = repo[i+1:]
	}
	if i := strings.Index(repo, ":"); i >= 0 {
		repo = repo[:i]
	}
	return repo
}
