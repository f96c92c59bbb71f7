package install

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	multiarchv1alpha1 "github.com/archway-build/archway/pkg/apis/multiarch/v1alpha1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/execformat"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// A least-privilege proof of the installed RBAC: every rule of every role
// bound to one of archway's service accounts (and the role of build pods'
// service account, archway-builder) is removed in turn, the components
// holding it are restarted, and the cases those components serve are run
// until one of two things happens:
//
//   - the apiserver refuses a request of one of those service accounts
//     that the removed rule covers (its audit log says so: RBAC's 403, or
//     an admission check that asks the authorizer for what the rule grants:
//     a Build's strategy, the use of a service account, blockOwnerDeletion,
//     binding a ClusterRole): the rule is needed;
//   - every case completes with no such refusal: the rule is unused, and
//     the test fails naming it.
//
// The rule is then put back, the components restarted again, and the
// cases of the component refused must complete: the refusal was what
// blocked them. The bed's apiserver writes the audit log
// (bed.Options.AuditServiceAccounts) and checks blockOwnerDeletion as
// OpenShift does (OwnerReferencesPermissionEnforcement).

// keptWithoutCase are the rules no quick case shows needed on the bed,
// each with the reason it is kept: removing one and seeing every case
// complete reports it as kept instead of failing. Keep this list short.
var keptWithoutCase = map[string]string{}

// key names a rule in keptWithoutCase.
func (r roleRule) key() string {
	return fmt.Sprintf("%s %s %v %v %v", r.kind, r.name, r.rule.Resources, r.rule.ResourceNames, r.rule.Verbs)
}

// rbacRules, when set (go test ... -args -rbac-rules=REGEXP), limits the
// proof to the rules whose description matches, for work on a few rules.
var rbacRules = flag.String("rbac-rules", "", "only the RBAC rules whose description matches this regular expression")

// rbacCaseTimeout bounds a case with the rule removed (waiting for a
// refusal) and with it restored (waiting for recovery).
const rbacCaseTimeout = 3 * time.Minute

// roleRule is one rule of a Role or ClusterRole as kustomize builds it.
type roleRule struct {
	kind, namespace, name string
	index                 int
	rule                  rbacv1.PolicyRule
	// accounts are the service accounts of archway's namespace bound to
	// the role; builder means build pods' service accounts.
	accounts []string
}

func (r roleRule) String() string {
	var parts []string
	if len(r.rule.NonResourceURLs) > 0 {
		parts = append(parts, strings.Join(r.rule.NonResourceURLs, ","))
	} else {
		groups := make([]string, len(r.rule.APIGroups))
		for i, g := range r.rule.APIGroups {
			groups[i] = g
			if g == "" {
				groups[i] = "core"
			}
		}
		parts = append(parts, strings.Join(groups, ",")+"/"+strings.Join(r.rule.Resources, ","))
	}
	if len(r.rule.ResourceNames) > 0 {
		parts = append(parts, "names="+strings.Join(r.rule.ResourceNames, ","))
	}
	parts = append(parts, "verbs="+strings.Join(r.rule.Verbs, ","))
	where := r.name
	if r.namespace != "" {
		where = r.namespace + "/" + r.name
	}
	return fmt.Sprintf("%s %s[%d] %s", r.kind, where, r.index, strings.Join(parts, " "))
}

// builderAccounts stands for the service accounts build pods run as (bound
// to archway-builder by build-controller, in each build namespace): the
// configured builder service account, builderServiceAccount.
const (
	builderAccounts       = "builder pods"
	builderServiceAccount = "builder"
)

// rbacEnv is what the cases need.
type rbacEnv struct {
	b       *bed.Bed
	overlay string
	// deployments maps a service account of archway's namespace to the
	// Deployment that runs as it.
	deployments map[string]string
	// cppc is the ClusterPodPlacementConfig as manifests/default ships it.
	cppc *multiarchv1beta1.ClusterPodPlacementConfig
	// strategyBindings are the shipped bindings that let every
	// authenticated user create Builds of the Docker and Source strategies.
	strategyBindings []*rbacv1.ClusterRoleBinding
	http             *http.Client
	// client is the bed's admin client with every API the cases write.
	client client.Client
	// builderNamespace is a namespace whose builder service account
	// build-controller bound to archway-builder (the first build case's,
	// kept).
	builderNamespace string

	mu         sync.Mutex
	namespaces []string // the cases' namespaces, for cleanup
}

// rbacCase is a quick end-to-end case; run returns nil once it completed.
// Exclusive cases run alone, after the others (they change what the
// others rely on).
type rbacCase struct {
	name      string
	exclusive bool
	run       func(ctx context.Context, e *rbacEnv, deployments []string) error
}

// componentCases are the cases that exercise each service account's
// permissions.
var componentCases = map[string][]string{
	"build-controller":                 {"build", "election", "metrics"},
	builderAccounts:                    {"build"},
	"archway-build-triggers":           {"trigger", "certs", "metrics"},
	"archway-placement-webhook":        {"placed", "preferences", "certs", "metrics"},
	"archway-placement-controller":     {"placed", "preferences", "release", "election", "metrics", "execformat"},
	"archway-placement-operator":       {"release", "election", "metrics", "certs", "olm"},
	"archway-scheduling-policy":        {"policy", "certs", "metrics"},
	"archway-control-plane-protection": {"protection", "certs", "metrics"},
}

var rbacCases = []rbacCase{
	{name: "build", run: buildCase},
	{name: "trigger", run: triggerCase},
	{name: "placed", run: placedCase},
	{name: "preferences", run: preferencesCase},
	{name: "policy", run: policyCase},
	{name: "protection", run: protectionCase},
	{name: "metrics", run: metricsCase},
	{name: "certs", run: certsCase},
	{name: "election", run: electionCase},
	{name: "execformat", run: execFormatCase},
	{name: "release", exclusive: true, run: releaseCase},
	{name: "olm", exclusive: true, run: olmCase},
}

// leastPrivilege runs the proof on an installed archway.
func leastPrivilege(t *testing.T, ctx context.Context, b *bed.Bed, overlay string) {
	if b.AuditLogPath == "" {
		t.Fatal("the bed writes no audit log")
	}
	bed.SetTestLogger()
	e := &rbacEnv{b: b, overlay: overlay, http: &http.Client{
		Timeout: 30 * time.Second,
		// The components' certificates are their own (self-signed metrics,
		// in-process webhook CA); what is tested is who may call them.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}}
	scheme := bed.NewScheme()
	if err := kupidv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := multiarchv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.client, err = client.New(b.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	rules, err := e.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *rbacRules != "" {
		re, err := regexp.Compile(*rbacRules)
		if err != nil {
			t.Fatalf("-rbac-rules: %v", err)
		}
		rules = slices.DeleteFunc(rules, func(r roleRule) bool { return !re.MatchString(r.String()) })
		t.Logf("-rbac-rules %q: %d rules", *rbacRules, len(rules))
	}
	// OpenShift's mirror sets, served as on OpenShift, so that placement
	// watches them.
	if err := installMirrorSetCRDs(b); err != nil {
		t.Fatal(err)
	}
	// OpenShift's image streams, which build-controller reads to resolve
	// a Build's ImageStreamTag and watches for ImageStreamTag triggers
	// (left installed, as the mirror sets: the components watch them).
	if _, err := b.ServeImageStreams(ctx); err != nil {
		t.Fatal(err)
	}
	// Restricted strategies, as an administrator may choose: without the
	// default bindings only those granted create on builds/<strategy> may
	// create Builds of it, archway's components included (their own
	// rules). Put back at the end.
	for _, crb := range e.strategyBindings {
		if err := e.client.Delete(ctx, crb.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, crb := range e.strategyBindings {
			if err := e.client.Create(context.WithoutCancel(ctx), crb.DeepCopy()); err != nil {
				t.Error(err)
			}
		}
	}()
	// One replica each: restarts are quicker, and the RBAC is the same.
	// The placement operator scales its operands to their annotation.
	for _, dep := range e.deployments {
		if err := scale(ctx, b, dep, 1); err != nil {
			t.Fatal(err)
		}
	}
	every := sets.List(sets.KeySet(e.deployments))
	if err := e.restart(ctx, every); err != nil {
		t.Fatal(err)
	}
	// Every case completes with every rule in place.
	start := time.Now()
	fctx, fcancel := context.WithTimeout(ctx, rbacCaseTimeout)
	defer fcancel()
	if name, err := e.runCases(fctx, allCaseNames(), every); err != nil {
		t.Fatalf("case %s fails with the full RBAC: %v", name, err)
	}
	t.Logf("every case completes with the full RBAC in %v", time.Since(start).Round(time.Millisecond))

	failed := 0
	for _, r := range rules {
		res, err := e.check(ctx, r)
		if err != nil {
			t.Errorf("%s\n    FAIL %v", r, err)
			failed++
		} else {
			t.Logf("%s\n    %s", r, res)
		}
		if ctx.Err() != nil {
			break
		}
	}
	t.Logf("%d rules removed in turn, %d needed, %d not: %v in all", len(rules), len(rules)-failed, failed, time.Since(start).Round(time.Second))
	if unused, err := unusedVerbs(b.AuditLogPath, rules); err != nil {
		t.Error(err)
	} else if len(unused) > 0 {
		t.Logf("verbs of these rules no allowed request used during the test:\n%s", strings.Join(unused, "\n"))
	}
}

// unusedVerbs lists, per rule, the verbs (and resources) no request of its
// service accounts was allowed for in the whole audit log.
func unusedVerbs(path string, rules []roleRule) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	type atom struct{ group, resource, verb string }
	used := make([]map[atom]bool, len(rules))
	for i := range used {
		used[i] = map[atom]bool{}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.ObjectRef == nil || ev.Annotations["authorization.k8s.io/decision"] != "allow" {
			continue
		}
		o := ev.ObjectRef
		for i, r := range rules {
			if accountOf(r, ev.User.Username) != "" && covers(r, o.APIGroup, resourceOf(o), ev.Verb, o.Namespace, o.Name) {
				used[i][atom{o.APIGroup, resourceOf(o), ev.Verb}] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []string
	for i, r := range rules {
		var missing []string
		for _, g := range r.rule.APIGroups {
			for _, res := range r.rule.Resources {
				for _, v := range r.rule.Verbs {
					// client-go's informers stream their first list in the
					// watch where the apiserver can (this one does), and
					// list where it cannot: a list kept with its watch.
					if v == "list" && used[i][atom{g, res, "watch"}] {
						continue
					}
					// Asked of the authorizer by admission, never requested:
					// use of a service account and builds/<strategy> (the
					// build-strategy policy), an owner's finalizers
					// (blockOwnerDeletion).
					if v == "use" || v == "bind" || strings.HasPrefix(res, "builds/") && v == "create" || strings.HasSuffix(res, "/finalizers") {
						continue
					}
					if !used[i][atom{g, res, v}] {
						missing = append(missing, fmt.Sprintf("%s %s.%s", v, res, g))
					}
				}
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("%s: %s", r, strings.Join(missing, ", ")))
		}
	}
	return out, nil
}

func allCaseNames() []string {
	var names []string
	for _, c := range rbacCases {
		names = append(names, c.name)
	}
	return names
}

// load reads the roles and bindings of the installed kustomization and
// returns every rule of every role bound to archway's service accounts,
// plus archway-builder's.
func (e *rbacEnv) load(ctx context.Context) ([]roleRule, error) {
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, kubectl, "kustomize", e.overlay).Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize: %w", err)
	}
	type roleKey struct{ kind, namespace, name string }
	roles := map[roleKey]rbacv1.Role{}
	bound := map[roleKey]sets.Set[string]{}
	e.deployments = map[string]string{}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		switch meta.Kind {
		case "Role", "ClusterRole":
			var r rbacv1.Role // a ClusterRole's rules read the same
			if err := yaml.Unmarshal(doc, &r); err != nil {
				return nil, err
			}
			roles[roleKey{meta.Kind, r.Namespace, r.Name}] = r
		case "RoleBinding", "ClusterRoleBinding":
			var rb rbacv1.RoleBinding
			if err := yaml.Unmarshal(doc, &rb); err != nil {
				return nil, err
			}
			if meta.Kind == "ClusterRoleBinding" && strings.HasPrefix(rb.Name, "archway:build-strategy-") {
				crb := &rbacv1.ClusterRoleBinding{}
				if err := yaml.Unmarshal(doc, crb); err != nil {
					return nil, err
				}
				e.strategyBindings = append(e.strategyBindings, crb)
			}
			ns := rb.Namespace
			if rb.RoleRef.Kind == "ClusterRole" {
				ns = ""
			}
			k := roleKey{rb.RoleRef.Kind, ns, rb.RoleRef.Name}
			for _, s := range rb.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace {
					if bound[k] == nil {
						bound[k] = sets.New[string]()
					}
					bound[k].Insert(s.Name)
				}
			}
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.Unmarshal(doc, &d); err != nil {
				return nil, err
			}
			e.deployments[d.Spec.Template.Spec.ServiceAccountName] = d.Name
		case "ClusterPodPlacementConfig":
			e.cppc = &multiarchv1beta1.ClusterPodPlacementConfig{}
			if err := yaml.Unmarshal(doc, e.cppc); err != nil {
				return nil, err
			}
		}
	}
	bound[roleKey{"ClusterRole", "", "archway-builder"}] = sets.New(builderAccounts)
	// The placement operator binds these while the config exists.
	for _, name := range operands {
		bound[roleKey{"ClusterRole", "", name}] = sets.New(name)
	}
	var keys []roleKey
	for k := range bound {
		if _, ok := roles[k]; !ok {
			return nil, fmt.Errorf("%s %s/%s is bound but not shipped", k.kind, k.namespace, k.name)
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].name+"/"+keys[i].namespace < keys[j].name+"/"+keys[j].namespace
	})
	var rules []roleRule
	for _, k := range keys {
		accounts := sets.List(bound[k])
		for _, a := range accounts {
			if _, ok := componentCases[a]; !ok {
				return nil, fmt.Errorf("service account %s (bound to %s %s) has no cases", a, k.kind, k.name)
			}
		}
		for i, r := range roles[k].Rules {
			rules = append(rules, roleRule{kind: k.kind, namespace: k.namespace, name: k.name, index: i, rule: r, accounts: accounts})
		}
	}
	if e.cppc == nil {
		return nil, errors.New("no ClusterPodPlacementConfig in the kustomization")
	}
	return rules, nil
}

// check removes one rule, restarts the components holding it and runs
// their cases until a covered refusal or until every case completed (the
// rule is unused); then it restores the rule and checks the case recovers.
func (e *rbacEnv) check(ctx context.Context, r roleRule) (string, error) {
	var cases, deps []string
	for _, a := range r.accounts {
		for _, c := range componentCases[a] {
			if !slices.Contains(cases, c) {
				cases = append(cases, c)
			}
		}
		if d, ok := e.deployments[a]; ok {
			deps = append(deps, d)
		}
	}
	mark, err := auditSize(e.b.AuditLogPath)
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := e.setRules(ctx, r, false); err != nil {
		return "", err
	}
	restored := false
	defer func() {
		if !restored {
			_ = e.setRules(context.WithoutCancel(ctx), r, true)
		}
	}()
	// The apiserver's authorizer follows roles through a cache: once it
	// refuses what the rule granted, the components start again.
	if err := e.waitAuthorized(ctx, r, false); err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, rbacCaseTimeout)
	defer cancel()
	refused := make(chan refusal, 1)
	go func() {
		if got, err := waitRefusal(rctx, e.b.AuditLogPath, mark, r); err == nil {
			refused <- got
			cancel()
		}
	}()
	// A metrics endpoint asks the apiserver about each new caller at the
	// time of the call (the metrics case scrapes as a new service account
	// each time), so archway-metrics-auth's rules need no restart; every
	// other rule may be used only when a component starts (a cache's list
	// and watch, a certificate read), so the components holding it start
	// again under the narrowed role.
	if r.name != "archway-metrics-auth" {
		if err := e.restart(rctx, deps); err != nil && rctx.Err() == nil {
			return "", err
		}
	}
	blocked, caseErr := e.runCases(rctx, cases, deps)
	var got refusal
	select {
	case got = <-refused:
	default:
		if caseErr != nil {
			return "", fmt.Errorf("neither refused nor completed: case %s: %w", blocked, caseErr)
		}
		// Every case completed: one last look at the log, for a refusal
		// written as the last case ended.
		fctx, fcancel := context.WithTimeout(ctx, 0)
		got, _ = waitRefusal(fctx, e.b.AuditLogPath, mark, r)
		fcancel()
		if got.what == "" {
			if why, ok := keptWithoutCase[r.key()]; ok {
				return "kept without a case: " + why, nil
			}
			return "", fmt.Errorf("unused: cases %s completed with the rule removed and no request refused", strings.Join(cases, ", "))
		}
	}
	refusedAfter := time.Since(start)
	// Back in place: the blocked case completes.
	if err := e.setRules(ctx, r, true); err != nil {
		return "", err
	}
	restored = true
	if err := e.waitAuthorized(ctx, r, true); err != nil {
		return "", err
	}
	recover := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, rbacCaseTimeout)
	defer rcancel()
	if r.name != "archway-metrics-auth" {
		if err := e.restart(rctx, deps); err != nil {
			return "", err
		}
	}
	// The cases of the component refused complete again.
	again := componentCases[got.account]
	if name, err := e.runCases(rctx, again, deps); err != nil {
		return "", fmt.Errorf("refused (%s), but case %s does not recover with the rule restored: %w", got.what, name, err)
	}
	return fmt.Sprintf("refused after %v: %s; %s recovered in %v", refusedAfter.Round(100*time.Millisecond), got.what,
		strings.Join(again, ","), time.Since(recover).Round(100*time.Millisecond)), nil
}

// runCases runs the named cases (the exclusive ones alone, last) and
// returns the first that failed. A case still running when ctx ends is the
// one returned.
func (e *rbacEnv) runCases(ctx context.Context, names, deps []string) (string, error) {
	defer e.cleanup(context.WithoutCancel(ctx))
	var shared, exclusive []rbacCase
	for _, c := range rbacCases {
		if !slices.Contains(names, c.name) {
			continue
		}
		if c.exclusive {
			exclusive = append(exclusive, c)
		} else {
			shared = append(shared, c)
		}
	}
	var (
		mu       sync.Mutex
		failed   string
		firstErr error
		wg       sync.WaitGroup
	)
	for _, c := range shared {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.run(ctx, e, deps); err != nil {
				mu.Lock()
				if firstErr == nil {
					failed, firstErr = c.name, err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return failed, firstErr
	}
	for _, c := range exclusive {
		if err := c.run(ctx, e, deps); err != nil {
			return c.name, err
		}
	}
	return "", nil
}

// setRules writes the role with the rule removed, or back as shipped.
func (e *rbacEnv) setRules(ctx context.Context, r roleRule, restore bool) error {
	key := client.ObjectKey{Namespace: r.namespace, Name: r.name}
	var obj client.Object
	var rules *[]rbacv1.PolicyRule
	if r.kind == "Role" {
		role := &rbacv1.Role{}
		obj, rules = role, &role.Rules
	} else {
		role := &rbacv1.ClusterRole{}
		obj, rules = role, &role.Rules
	}
	for {
		if err := e.client.Get(ctx, key, obj); err != nil {
			return err
		}
		if restore {
			if len(*rules) == r.index || !equalRule((*rules)[r.index], r.rule) {
				*rules = slices.Insert(slices.Clone(*rules), r.index, r.rule)
			}
		} else {
			if r.index >= len(*rules) || !equalRule((*rules)[r.index], r.rule) {
				return fmt.Errorf("%s: the installed role differs from the kustomization", r)
			}
			*rules = slices.Delete(slices.Clone(*rules), r.index, r.index+1)
		}
		err := e.client.Update(ctx, obj)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// waitAuthorized waits until the apiserver answers SubjectAccessReviews
// for what the rule grants (its first resource and name, each of its
// verbs), asked for each of its service accounts: with the rule removed, until one is
// refused (the change is in effect; still allowed for all means other
// rules grant the same); restored, until all are allowed.
func (e *rbacEnv) waitAuthorized(ctx context.Context, r roleRule, allowed bool) error {
	var reviews []*authorizationv1.SubjectAccessReview
	for _, account := range r.accounts {
		ns, name := namespace, account
		if account == builderAccounts {
			// archway-builder is bound by RoleBindings: ask as a build
			// namespace's builder.
			ns, name = e.builderNamespace, builderServiceAccount
		}
		// Every verb: another rule may grant some of them (a cluster-wide
		// get beside a Role's get, list and watch of one object).
		for _, verb := range r.rule.Verbs {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:" + ns + ":" + name,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			}}
			if len(r.rule.NonResourceURLs) > 0 {
				sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.rule.NonResourceURLs[0], Verb: verb}
			} else {
				resource, sub, _ := strings.Cut(r.rule.Resources[0], "/")
				ra := &authorizationv1.ResourceAttributes{Namespace: r.namespace, Group: r.rule.APIGroups[0], Resource: resource, Subresource: sub, Verb: verb}
				if account == builderAccounts {
					ra.Namespace = ns
				}
				if len(r.rule.ResourceNames) > 0 {
					ra.Name = r.rule.ResourceNames[0]
				}
				sar.Spec.ResourceAttributes = ra
			}
			reviews = append(reviews, sar)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, bed.DefaultTimeout)
	defer cancel()
	err := poll(ctx, "the apiserver's authorizer", func() (bool, error) {
		all, anyRefused := true, false
		for _, sar := range reviews {
			got := sar.DeepCopy()
			if err := e.client.Create(ctx, got); err != nil {
				return false, err
			}
			all = all && got.Status.Allowed
			anyRefused = anyRefused || !got.Status.Allowed
		}
		if allowed {
			return all, nil
		}
		return anyRefused, nil
	})
	if err != nil && !allowed {
		return fmt.Errorf("still allowed to every account with the rule removed (other rules grant the same): %w", err)
	}
	return err
}

// restart deletes the pods of the Deployments and waits until their
// replacements run.
func (e *rbacEnv) restart(ctx context.Context, deps []string) error {
	if slices.ContainsFunc(deps, func(d string) bool { return slices.Contains(operands, d) }) {
		// The operands run only while the config exists.
		if err := ensureConfig(ctx, e); err != nil {
			return err
		}
	}
	old := sets.New[string]()
	for _, d := range deps {
		var pods corev1.PodList
		if err := e.client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": d}); err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			old.Insert(string(p.UID))
			if err := e.client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	for {
		running := 0
		for _, d := range deps {
			var pods corev1.PodList
			if err := e.client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": d}); err != nil {
				return err
			}
			for _, p := range pods.Items {
				if !old.Has(string(p.UID)) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					running++
					break
				}
			}
		}
		if running == len(deps) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restarting %v: %w", deps, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func scale(ctx context.Context, b *bed.Bed, name string, replicas int32) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if slices.Contains(operands, name) {
		patch = fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"%d"}}}`, placement.ReplicasAnnotation, replicas)
	}
	return b.Client.Patch(ctx, d, client.RawPatch("application/merge-patch+json", patch))
}

func auditSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// refusal is a refused request: what it was, and the service account
// (as componentCases names it) that made it.
type refusal struct{ what, account string }

// waitRefusal reads the audit log from offset until a refused request of
// one of the rule's service accounts that the rule covers, and says which.
// It returns ctx's error when none came before ctx ended (it reads what the
// file holds at least once).
func waitRefusal(ctx context.Context, path string, offset int64, r roleRule) (refusal, error) {
	f, err := os.Open(path)
	if err != nil {
		return refusal{}, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return refusal{}, err
	}
	rd := bufio.NewReaderSize(f, 1<<20)
	var partial []byte
	for {
		line, err := rd.ReadBytes('\n')
		partial = append(partial, line...)
		if err == nil {
			var ev auditv1.Event
			if json.Unmarshal(partial, &ev) == nil && ev.Stage == auditv1.StageResponseComplete {
				if got, ok := refusedBy(r, &ev); ok {
					return got, nil
				}
			}
			partial = partial[:0]
			continue
		}
		if !errors.Is(err, io.EOF) {
			return refusal{}, err
		}
		select {
		case <-ctx.Done():
			return refusal{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// accountOf is the service account of an audit event's user among the
// rule's accounts (builderAccounts for a build pod's), or "".
func accountOf(r roleRule, user string) string {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return ""
	}
	ns, name, _ := strings.Cut(rest, ":")
	if ns == namespace && slices.Contains(r.accounts, name) {
		return name
	}
	if ns != namespace && name == builderServiceAccount && slices.Contains(r.accounts, builderAccounts) {
		return builderAccounts
	}
	return ""
}

var (
	strategyRefused = regexp.MustCompile(`build strategy (\w+) is not allowed`)
	useRefused      = regexp.MustCompile(`may not use service account (\S+) in namespace`)
	getRefused      = regexp.MustCompile(`may not get (Secret|ConfigMap) (\S+) in namespace`)
)

// refusedBy says whether the event is a refusal of a request of the
// rule's service accounts that the rule covers.
func refusedBy(r roleRule, ev *auditv1.Event) (refusal, bool) {
	if ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusForbidden {
		return refusal{}, false
	}
	account := accountOf(r, ev.User.Username)
	if account == "" {
		return refusal{}, false
	}
	describe := func(why string) refusal {
		return refusal{what: fmt.Sprintf("%s %s by %s (%s)", ev.Verb, requestTarget(ev), strings.TrimPrefix(ev.User.Username, "system:serviceaccount:"), why), account: account}
	}
	if ev.Annotations["authorization.k8s.io/decision"] == "forbid" {
		if ev.ObjectRef == nil {
			path, _, _ := strings.Cut(ev.RequestURI, "?")
			if slices.Contains(r.rule.Verbs, ev.Verb) && slices.Contains(r.rule.NonResourceURLs, path) {
				return describe("RBAC"), true
			}
			return refusal{}, false
		}
		o := ev.ObjectRef
		if covers(r, o.APIGroup, resourceOf(o), ev.Verb, o.Namespace, o.Name) {
			return describe("RBAC"), true
		}
		return refusal{}, false
	}
	// Admission checks that ask the authorizer what the rule may grant.
	msg := ev.ResponseStatus.Message
	ns := ""
	if ev.ObjectRef != nil {
		ns = ev.ObjectRef.Namespace
	}
	if m := strategyRefused.FindStringSubmatch(msg); m != nil &&
		covers(r, buildv1.GroupVersion.Group, "builds/"+strings.ToLower(m[1]), "create", ns, "") {
		return describe("archway-build-strategy policy: " + m[0]), true
	}
	if m := useRefused.FindStringSubmatch(msg); m != nil && covers(r, "", "serviceaccounts", "use", ns, m[1]) {
		return describe("archway-build-strategy policy: " + m[0]), true
	}
	if m := getRefused.FindStringSubmatch(msg); m != nil && covers(r, "", strings.ToLower(m[1])+"s", "get", ns, m[2]) {
		return describe("archway-build-references policy: " + m[0]), true
	}
	if strings.Contains(msg, "cannot set blockOwnerDeletion") &&
		covers(r, buildv1.GroupVersion.Group, "builds/finalizers", "update", ns, "") {
		return describe("OwnerReferencesPermissionEnforcement"), true
	}
	bound := "archway-builder"
	if ev.ObjectRef != nil && ev.ObjectRef.Resource == "clusterrolebindings" {
		// The placement operator's bindings bind the role of their name.
		bound = ev.ObjectRef.Name
	}
	if strings.Contains(msg, "attempting to grant RBAC permissions not currently held") &&
		(covers(r, rbacv1.GroupName, "clusterroles", "bind", "", bound) ||
			covers(r, rbacv1.GroupName, "roles", "bind", ns, "")) {
		return describe("RBAC escalation check"), true
	}
	return refusal{}, false
}

func resourceOf(o *auditv1.ObjectReference) string {
	if o.Subresource != "" {
		return o.Resource + "/" + o.Subresource
	}
	return o.Resource
}

func requestTarget(ev *auditv1.Event) string {
	if ev.ObjectRef == nil {
		return ev.RequestURI
	}
	o := ev.ObjectRef
	s := resourceOf(o)
	if o.APIGroup != "" {
		s += "." + o.APIGroup
	}
	if o.Namespace != "" {
		s += " in " + o.Namespace
	}
	if o.Name != "" {
		s += " " + o.Name
	}
	return s
}

// covers says whether the rule grants verb on resource (with its
// subresource) of group, named name, in namespace ns.
func covers(r roleRule, group, resource, verb, ns, name string) bool {
	if r.kind == "Role" && ns != r.namespace {
		return false
	}
	in := func(list []string, v string) bool {
		return slices.Contains(list, v) || slices.Contains(list, "*")
	}
	return in(r.rule.APIGroups, group) && in(r.rule.Resources, resource) && in(r.rule.Verbs, verb) &&
		(len(r.rule.ResourceNames) == 0 || slices.Contains(r.rule.ResourceNames, name))
}

// installMirrorSetCRDs installs OpenShift's ImageDigestMirrorSet and
// ImageTagMirrorSet CRDs as github.com/openshift/api (the version go.mod
// pins) ships them.
func installMirrorSetCRDs(b *bed.Bed) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		return fmt.Errorf("finding github.com/openshift/api: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "v1", "zz_generated.crd-manifests")
	_, err = envtest.InstallCRDs(b.Config, envtest.CRDInstallOptions{Paths: []string{
		filepath.Join(dir, "0000_10_config-operator_01_imagedigestmirrorsets.crd.yaml"),
		filepath.Join(dir, "0000_10_config-operator_01_imagetagmirrorsets.crd.yaml"),
	}, ErrorIfPathMissing: true})
	return err
}

// poll calls f until it returns true or an error, or ctx ends.
func poll(ctx context.Context, what string, f func() (bool, error)) error {
	var last error
	for {
		ok, err := f()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: %w (last error: %w)", what, ctx.Err(), last)
			}
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// retryCreate creates obj, again while the apiserver cannot reach a
// webhook that fails closed (it is restarting).
func retryCreate(ctx context.Context, c client.Client, obj client.Object) error {
	var final error
	err := poll(ctx, "creating "+obj.GetName(), func() (bool, error) {
		err := c.Create(ctx, obj)
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) ||
			strings.Contains(err.Error(), "failed calling webhook"):
			return false, err
		default:
			final = err
			return true, nil
		}
	})
	if final != nil {
		return final
	}
	return err
}

// caseNamespace is a new namespace for one run of a case, deleted with
// its pods when ctx ends (the case has returned): the bed's nodes hold a
// hundred-odd pods each, and the proof runs the cases hundreds of times.
func caseNamespace(ctx context.Context, e *rbacEnv, prefix string) (string, error) {
	ns, err := e.b.CreateNamespace(ctx, "rbac-"+prefix)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	e.namespaces = append(e.namespaces, ns)
	e.mu.Unlock()
	return ns, nil
}

// cleanup deletes the cases' namespaces, their pods at once (the bed runs
// none of them: nothing ends them).
func (e *rbacEnv) cleanup(ctx context.Context) {
	e.mu.Lock()
	namespaces := e.namespaces
	e.namespaces = nil
	e.mu.Unlock()
	for _, ns := range namespaces {
		_ = e.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
		_ = e.client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
}

// pushSecret is a docker config Secret for the bed's registry (which
// accepts any credentials).
func pushSecret(ns, name, host string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte("archway:archway"))
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, host, auth)},
	}
}

// buildCase: in a new namespace (build-controller makes its builder
// service account and binds archway-builder to it), a two-platform build
// of a Git source holding a one-line Dockerfile (its first pod records the
// commit in spec.revision), started by its ConfigChange trigger (the
// buildconfig controller), pushed with a push secret, and pruned once
// complete (history limit 0); and a BuildConfig that names another service account and a
// ConfigMap, whose first Build the controller may create only if it may use that account
// and get the ConfigMap (its platform has no node: it fails at once, without pods).
func buildCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	ns, err := caseNamespace(ctx, e, "build")
	if err != nil {
		return err
	}
	if e.builderNamespace == "" {
		e.builderNamespace = ns
		e.mu.Lock()
		e.namespaces = slices.DeleteFunc(e.namespaces, func(n string) bool { return n == ns })
		e.mu.Unlock()
	}
	if err := c.Create(ctx, pushSecret(ns, "push", e.b.Registry.Host)); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}); err != nil {
		return err
	}
	// A Git source: its first pod records the commit in spec.revision.
	repo, err := os.MkdirTemp(e.b.Dir, "rbac-git-")
	if err != nil {
		return err
	}
	uri, err := framework.GitRepo(repo, map[string]string{"Dockerfile": "FROM " + e.b.BaseImage + "\nENV CASE=rbac\n"})
	if err != nil {
		return err
	}
	newBC := func(name, sa string, platforms ...string) *buildv1.BuildConfig {
		bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: uri, Ref: "main"}}
		bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
		bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: e.b.Registry.Host + "/" + ns + "/" + name + ":latest"}
		bc.Spec.Output.PushSecret = &corev1.LocalObjectReference{Name: "push"}
		bc.Spec.Platforms = platforms
		bc.Spec.ServiceAccount = sa
		bc.Spec.SuccessfulBuildsHistoryLimit = ptr.To[int32](0)
		bc.Spec.Triggers = []buildv1.BuildTriggerPolicy{{Type: buildv1.ConfigChangeBuildTriggerType}}
		return bc
	}
	if err := c.Create(ctx, newBC("app", "", "linux/amd64", "linux/arm64")); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
		return err
	}
	other := newBC("other", "app", "linux/riscv64")
	other.Spec.Source.ConfigMaps = []buildv1.ConfigMapBuildSource{{ConfigMap: corev1.LocalObjectReference{Name: "settings"}}}
	if err := c.Create(ctx, other); err != nil {
		return err
	}
	if err := poll(ctx, "Build other-1 created", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other-1"}, &buildv1.Build{})
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	seen := false
	if err := poll(ctx, "Build app-1 complete and pruned", func() (bool, error) {
		b := &buildv1.Build{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-1"}, b)
		switch {
		case apierrors.IsNotFound(err):
			return seen, nil
		case err != nil:
			return false, err
		}
		seen = true
		if b.Status.Phase.IsTerminal() && b.Status.Phase != buildv1.BuildPhaseComplete {
			return false, fmt.Errorf("build app-1 %s: %s", b.Status.Phase, b.Status.Message)
		}
		return false, nil
	}); err != nil {
		return err
	}
	// Pruned after it completed: its image is there, and the controller
	// recorded the build's events.
	if _, err := e.b.Registry.ManifestDigest(ctx, ns+"/app", "latest"); err != nil {
		return err
	}
	if err := waitEvent(ctx, c, ns, "build-controller"); err != nil {
		return err
	}
	// A Build from an ImageStreamTag: the controller reads the stream to
	// resolve it (then fails it at once: no node builds linux/riscv64).
	stream := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
		"metadata": map[string]any{"namespace": ns, "name": "base"},
		"status": map[string]any{"dockerImageRepository": e.b.Registry.Host + "/archway/busybox", "tags": []any{map[string]any{
			"tag": "1.0", "items": []any{map[string]any{
				"created": "2026-11-29T00:00:00Z", "dockerImageReference": e.b.BaseImage, "image": "sha256:" + strings.Repeat("1", 64), "generation": int64(1)}}}}},
	}}
	if err := c.Create(ctx, stream); err != nil {
		return err
	}
	streamed := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "streamed"}}
	streamed.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: ptr.To("FROM scratch\n")}
	streamed.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{
		From: &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base:1.0"}}}
	streamed.Spec.Platforms = []string{"linux/riscv64"}
	if err := c.Create(ctx, streamed); err != nil {
		return err
	}
	return poll(ctx, "Build streamed resolved", func() (bool, error) {
		b := &buildv1.Build{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(streamed), b); err != nil {
			return false, err
		}
		return b.Annotations[imagestream.ResolvedImagesAnnotation] != "", nil
	})
}

// triggerCase: a generic webhook delivery to the trigger endpoint starts a
// Build of a BuildConfig whose trigger secret is a Secret, whose
// service account is not builder and which names a ConfigMap.
func triggerCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	ns, err := caseNamespace(ctx, e, "trigger")
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		Data:       map[string][]byte{buildv1.WebHookSecretKey: []byte("s3cret")},
	}); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}); err != nil {
		return err
	}
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: ptr.To("FROM " + e.b.BaseImage + "\n")}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: e.b.Registry.Host + "/" + ns + "/app:latest"}
	bc.Spec.ServiceAccount = "app"
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}); err != nil {
		return err
	}
	bc.Spec.Source.ConfigMaps = []buildv1.ConfigMapBuildSource{{ConfigMap: corev1.LocalObjectReference{Name: "settings"}}}
	// No node builds it: the Build fails at once, without pods.
	bc.Spec.Platforms = []string{"linux/riscv64"}
	bc.Spec.Triggers = []buildv1.BuildTriggerPolicy{{Type: buildv1.GenericWebHookBuildTriggerType,
		GenericWebHook: &buildv1.WebHookTrigger{SecretReference: &buildv1.SecretLocalReference{Name: "hook"}}}}
	if err := c.Create(ctx, bc); err != nil {
		return err
	}
	// Through the apiserver, unauthenticated: build-triggers verifies the
	// apiserver's front-proxy certificate (the CA read from
	// kube-system/extension-apiserver-authentication) and authorizes the
	// anonymous user (SubjectAccessReview).
	anonymous, err := rest.HTTPClientFor(rest.AnonymousClientConfig(e.b.Config))
	if err != nil {
		return err
	}
	server, _, err := rest.DefaultServerUrlFor(e.b.Config)
	if err != nil {
		return err
	}
	if err := poll(ctx, "generic webhook delivery through the apiserver", func() (bool, error) {
		url := strings.TrimSuffix(server.String(), "/") + paths.Webhook(paths.AggregatedPrefix, ns, "app", "s3cret", "generic")
		resp, err := anonymous.Post(url, "application/json", strings.NewReader("{}"))
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return false, fmt.Errorf("%s: %s", resp.Status, body)
		}
		return true, nil
	}); err != nil {
		return err
	}
	path := "/apis/build.openshift.io/v1/namespaces/" + ns + "/buildconfigs/app/webhooks/s3cret/generic"
	return poll(ctx, "generic webhook delivery", func() (bool, error) {
		ip, err := e.podIP(ctx, e.deployments["archway-build-triggers"])
		if err != nil {
			return false, err
		}
		resp, err := e.http.Post("https://"+net.JoinHostPort(ip, "9443")+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return false, fmt.Errorf("%s: %s", resp.Status, body)
		}
		return true, nil
	})
}

// podIP is the IP of a running pod of the Deployment.
func (e *rbacEnv) podIP(ctx context.Context, dep string) (string, error) {
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": dep}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			return p.Status.PodIP, nil
		}
	}
	return "", fmt.Errorf("no running pod of %s", dep)
}

// gatedPod creates a pod the placement webhook gates, with a pull secret,
// again until the webhook gated one (while it starts, pods pass ungated:
// the gate webhook fails open, and gates only while the controller's
// heartbeat is fresh).
func gatedPod(ctx context.Context, e *rbacEnv, ns, name string) error {
	_, err := placedPod(ctx, e, ns, name, 0)
	return err
}

// placedPod is gatedPod's loop, starting at pod number first; it returns
// the pod as placed.
func placedPod(ctx context.Context, e *rbacEnv, ns, name string, first int) (*corev1.Pod, error) {
	c := e.client
	if err := c.Create(ctx, pushSecret(ns, "pull", e.b.Registry.Host)); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	for i := first; ; i++ {
		pod := testPod(ns, fmt.Sprintf("%s-%d", name, i), e.b.BaseImage)
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
		if err := retryCreate(ctx, c, pod); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate }) {
			got := &corev1.Pod{}
			if err := poll(ctx, "pod "+pod.Name+" placed", func() (bool, error) {
				if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
					return false, err
				}
				return len(got.Spec.SchedulingGates) == 0 && got.Labels[placement.SchedulingGateLabel] == placement.SchedulingGateLabelRemoved, nil
			}); err != nil {
				return nil, err
			}
			// The webhook's gating event and the controller's.
			if err := waitEvent(ctx, c, ns, "pod-placement-webhook"); err != nil {
				return nil, err
			}
			return got, waitEvent(ctx, c, ns, "pod-placement-controller")
		}
		if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no pod gated: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureConfig waits until the ClusterPodPlacementConfig exists (not
// being deleted), creating it as shipped when it is gone: a release case
// stopped half-way may have left it deleted.
func ensureConfig(ctx context.Context, e *rbacEnv) error {
	return poll(ctx, "the ClusterPodPlacementConfig", func() (bool, error) {
		cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
		err := e.client.Get(ctx, client.ObjectKeyFromObject(e.cppc), cfg)
		if apierrors.IsNotFound(err) {
			err = e.client.Create(ctx, e.cppc.DeepCopy())
			return err == nil, err
		}
		return err == nil && cfg.DeletionTimestamp == nil, err
	})
}

// execFormatCase: with the exec-format-error monitor on, a container that
// ends as runc ends one whose entrypoint is for another architecture
// (exit code 255, "exec format error" on its stderr) gets the monitor's
// ExecFormatError event: the monitor read its log. The pod runs on a kwok
// node through the bed's pod runner (sh from this machine), in a namespace
// placement leaves alone.
func execFormatCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	if err := ensureConfig(ctx, e); err != nil {
		return err
	}
	patch := []byte(`{"spec":{"plugins":{"execFormatErrorMonitor":{"enabled":true}}}}`)
	if err := c.Patch(ctx, e.cppc.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	ns, err := caseNamespace(ctx, e, "execformat")
	if err != nil {
		return err
	}
	nsObj := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		return err
	}
	nsObj.Labels[placement.ExcludeNamespaceLabel] = ""
	if err := c.Update(ctx, nsObj); err != nil {
		return err
	}
	// The monitor watches from when it sees the config enabled: a new pod
	// until one is reported.
	for i := 0; ; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("mislabelled-%d", i), Labels: map[string]string{bed.ManualPodLabel: "true"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false), Containers: []corev1.Container{{
				Name: "main", Image: framework.ControllerRepository + ":e2e",
				Command: []string{"sh", "-c", "echo 'exec /app: exec format error' >&2; exit 255"},
			}}},
		}
		if err := retryCreate(ctx, c, pod); err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := poll(pctx, "an ExecFormatError event in "+ns, func() (bool, error) {
			var events eventsv1.EventList
			if err := c.List(pctx, &events, client.InNamespace(ns)); err != nil {
				return false, err
			}
			return slices.ContainsFunc(events.Items, func(ev eventsv1.Event) bool { return ev.Reason == execformat.EventReason }), nil
		})
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w; %s", err, placementControllerLogs(ctx, e, ns))
		}
	}
}

// placementControllerLogs is the end of each placement controller pod's log
// and the case's pods' states, to tell why a case failed.
func placementControllerLogs(_ context.Context, e *rbacEnv, ns string) string {
	ctx := context.Background()
	var out strings.Builder
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(framework.InstallNamespace)); err == nil {
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Name, "archway-placement-controller") {
				continue
			}
			log, err := e.b.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To(int64(15))}).DoRaw(ctx)
			fmt.Fprintf(&out, "\n%s (%v):\n%s", p.Name, err, log)
		}
	}
	if err := e.client.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&out, "\npod %s on %q: %s %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses)
		}
	}
	return out.String()
}

// placedCase: a pod is gated at admission and placed.
func placedCase(ctx context.Context, e *rbacEnv, _ []string) error {
	if err := ensureConfig(ctx, e); err != nil {
		return err
	}
	ns, err := caseNamespace(ctx, e, "placed")
	if err != nil {
		return err
	}
	return gatedPod(ctx, e, ns, "placed")
}

// preferencesCase: a PodPlacementConfig is admitted (its priority
// claimed), a pod placed with its preference (counted in its status),
// and its claim released when it is deleted.
func preferencesCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	if err := ensureConfig(ctx, e); err != nil {
		return err
	}
	ns, err := caseNamespace(ctx, e, "prefs")
	if err != nil {
		return err
	}
	ppc := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prefer-arm64"}}
	ppc.Spec.Priority = 7
	ppc.Spec.Plugins = &multiarchv1beta1.Plugins{NodeAffinityScoring: &multiarchv1beta1.NodeAffinityScoring{
		Enabled: true, Platforms: []multiarchv1beta1.NodeAffinityScoringPlatformTerm{{Architecture: "arm64", Weight: 50}},
	}}
	if err := retryCreate(ctx, c, ppc); err != nil {
		return err
	}
	var claims coordinationv1.LeaseList
	if err := poll(ctx, "priority claimed", func() (bool, error) {
		if err := c.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(claims.Items) > 0, nil
	}); err != nil {
		return err
	}
	// A pod admitted before the webhook's cache holds the new config is
	// placed without its preference (and never counted): again with a new
	// pod until one has it.
	for i := 0; ; i += 100 {
		pod, err := placedPod(ctx, e, ns, "preferred", i)
		if err != nil {
			return err
		}
		if hasPreferredArch(pod, "arm64") {
			break
		}
	}
	if err := poll(ctx, "appliedPods counted", func() (bool, error) {
		got := &multiarchv1beta1.PodPlacementConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ppc), got); err != nil {
			return false, err
		}
		return got.Status.AppliedPods > 0, nil
	}); err != nil {
		return err
	}
	if err := c.Delete(ctx, ppc); err != nil {
		return err
	}
	return poll(ctx, "priority claim released", func() (bool, error) {
		if err := c.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(claims.Items) == 0, nil
	})
}

// releaseCase: the ClusterPodPlacementConfig is deleted (the controller
// releases a gated pod and then its finalizer) and created again as
// shipped (the controller holds it with its finalizer again and reports
// its status).
func releaseCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	if err := ensureConfig(ctx, e); err != nil {
		return err
	}
	ns, err := caseNamespace(ctx, e, "release")
	if err != nil {
		return err
	}
	// PodPlacementConfigs hold the ClusterPodPlacementConfig (its deletion
	// webhook refuses while any exists).
	var ppcs multiarchv1beta1.PodPlacementConfigList
	if err := c.List(ctx, &ppcs); err != nil {
		return err
	}
	for i := range ppcs.Items {
		if err := c.Delete(ctx, &ppcs.Items[i]); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	pod := testPod(ns, "waiting", unreachableImageAddr())
	if err := retryCreate(ctx, c, pod); err != nil {
		return err
	}
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	// Again while the deletion webhook's cache still shows a deleted
	// PodPlacementConfig.
	if err := poll(ctx, "deleting the config", func() (bool, error) {
		err := c.Delete(ctx, cfg)
		return client.IgnoreNotFound(err) == nil, err
	}); err != nil {
		return err
	}
	if err := poll(ctx, "config gone", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	got := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		return err
	}
	if len(got.Spec.SchedulingGates) > 0 {
		return errors.New("the config is gone and a pod is still gated")
	}
	// The placement operator let the config go once the operand was
	// stopped: no pod of it runs and it holds no cluster-wide right.
	if err := operandStopped(ctx, c); err != nil {
		return err
	}
	again := e.cppc.DeepCopy()
	if err := retryCreate(ctx, c, again); err != nil {
		return err
	}
	if err := poll(ctx, "config held and reported", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(again), again); err != nil {
			return false, err
		}
		return slices.Contains(again.Finalizers, placement.ConfigFinalizer) && slices.Contains(again.Finalizers, placement.OperandFinalizer) &&
			len(again.Status.Conditions) > 0, nil
	}); err != nil {
		return err
	}
	// Back up, as the next cases need it.
	return poll(ctx, "the operand rolled out", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(again), again); err != nil {
			return false, err
		}
		for _, t := range []string{multiarchv1beta1.ConditionPodPlacementControllerNotRolledOut, multiarchv1beta1.ConditionPodPlacementWebhookNotRolledOut} {
			if !meta.IsStatusConditionFalse(again.Status.Conditions, t) {
				return false, nil
			}
		}
		return true, nil
	})
}

// operandStopped checks what the placement operator leaves without a
// ClusterPodPlacementConfig: the placement controller's and webhook's
// Deployments at 0 replicas with no pod left, their cluster-wide bindings
// deleted, and the controller's service account unable to read a Secret.
func operandStopped(ctx context.Context, c client.Client) error {
	for _, name := range operands {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
			return fmt.Errorf("no config, and Deployment %s has %v replicas", name, ptr.Deref(d.Spec.Replicas, 1))
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/name": name}); err != nil {
			return err
		}
		// A pod that ended (the bed does not restart a process that
		// exits) runs nothing.
		pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		if len(pods.Items) > 0 {
			return fmt.Errorf("no config, and %d pods of %s are running", len(pods.Items), name)
		}
		switch err := c.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{}); {
		case err == nil:
			return fmt.Errorf("no config, and ClusterRoleBinding %s is left", name)
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading ClusterRoleBinding %s: %w", name, err)
		}
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + namespace + ":" + placement.ControllerName,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Resource: "secrets", Verb: "get", Name: "any"},
	}}
	// The authorizer follows bindings through a cache: give it a moment
	// to see the deletion the apiserver has confirmed.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := poll(sctx, "the authorizer refusing Secrets to the controller", func() (bool, error) {
		got := sar.DeepCopy()
		if err := c.Create(sctx, got); err != nil {
			return false, err
		}
		return !got.Status.Allowed, nil
	}); err != nil {
		return fmt.Errorf("no config, and the placement controller's service account may still read Secrets: %w", err)
	}
	return nil
}

// unreachableImageAddr names an image on a port nothing listens on.
func unreachableImageAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:1/nowhere/app:1"
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr + "/nowhere/app:1"
}

// policyCase: a PodSchedulingPolicy is admitted, merged into a new pod,
// the pod counted in its status, and the part the pod kept its own value
// for recorded as an event on it.
func policyCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	ns, err := caseNamespace(ctx, e, "policy")
	if err != nil {
		return err
	}
	psp := &kupidv1alpha1.PodSchedulingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zone"}}
	psp.Spec.PodSelector = &metav1.LabelSelector{}
	psp.Spec.NodeSelector = map[string]string{"rbac.archway.dev/zone": "a", "rbac.archway.dev/disk": "ssd"}
	if err := retryCreate(ctx, c, psp); err != nil {
		return err
	}
	var pod *corev1.Pod
	for i := 0; ; i++ {
		pod = testPod(ns, fmt.Sprintf("p-%d", i), e.b.BaseImage)
		pod.Spec.NodeSelector = map[string]string{"rbac.archway.dev/disk": "hdd"}
		if err := retryCreate(ctx, c, pod); err != nil {
			return err
		}
		if pod.Spec.NodeSelector["rbac.archway.dev/zone"] == "a" {
			break
		}
		if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no pod got the policy's node selector: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := poll(ctx, "matchedPods counted", func() (bool, error) {
		got := &kupidv1alpha1.PodSchedulingPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(psp), got); err != nil {
			return false, err
		}
		return got.Status.MatchedPods > 0, nil
	}); err != nil {
		return err
	}
	return poll(ctx, "skipped-part event", func() (bool, error) {
		var events eventsv1.EventList
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(ev eventsv1.Event) bool {
			return ev.Reason == policy.EventPolicyPartsSkipped && ev.Regarding.Name == pod.Name
		}), nil
	})
}

// protectionCase: a pod bound to the control-plane node by an
// unauthorized user is admitted (mode Inform) and the webhook records why.
func protectionCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	ns, err := caseNamespace(ctx, e, "protect")
	if err != nil {
		return err
	}
	// A tenant who may create pods in the namespace: the bed's admin is in
	// system:masters, which the shipped list authorizes.
	const tenant = "rbac-protection-tenant"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenant}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	// In mode Inform the pods webhook fails open: a pod created while the
	// component is not serving is admitted unjudged and never gets an
	// event. A dry run answered with the webhook's warning says it serves.
	warned := &warningCatcher{}
	cfg := rest.CopyConfig(e.b.Config)
	cfg.WarningHandler = warned
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenant, Groups: []string{"system:authenticated"}}
	asTenant, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		pod := testPod(ns, fmt.Sprintf("cp-%d", i), e.b.BaseImage)
		pod.Spec.NodeName = "control-plane-1"
		if err := poll(ctx, "the protection webhook's warning", func() (bool, error) {
			warned.take()
			if err := asTenant.Create(ctx, pod.DeepCopy(), client.DryRunAll); err != nil {
				return false, nil
			}
			return slices.ContainsFunc(warned.take(), func(w string) bool { return strings.Contains(w, "protected node group") }), nil
		}); err != nil {
			return err
		}
		if err := useGranted(ctx, e, ns, asTenant, warned); err != nil {
			return err
		}
		if err := retryCreate(ctx, asTenant, pod); err != nil {
			return err
		}
		var events eventsv1.EventList
		err := poll(ctx, "protection event", func() (bool, error) {
			if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
				return false, err
			}
			return slices.ContainsFunc(events.Items, func(ev eventsv1.Event) bool {
				return ev.Reason == protection.EventUnauthorizedPlacement && ev.Regarding.Name == pod.Name
			}), nil
		})
		if err != nil && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return err
		}
		return protectionStatusWritten(ctx, c, ns)
	}
}

// useGranted: a user RBAC grants the use of the ControlPlane group in ns
// (the webhook asks with a SubjectAccessReview) binds a pod to the
// control-plane node with no warning, between two of the tenant's warned
// dry runs that show the webhook serving.
func useGranted(ctx context.Context, e *rbacEnv, ns string, asTenant client.Client, warned *warningCatcher) error {
	const granted = "rbac-protection-granted"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control-plane-user"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}},
			{APIGroups: []string{schedulingv1alpha1.GroupVersion.Group}, Verbs: []string{protection.UseVerb},
				Resources: []string{protection.ProtectionsResource + "/" + protection.GroupSubresource(schedulingv1alpha1.ControlPlane)}},
		}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control-plane-user"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: granted}}}
	for _, o := range []client.Object{role, binding} {
		if err := e.client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	cfg := rest.CopyConfig(e.b.Config)
	grantedWarned := &warningCatcher{}
	cfg.WarningHandler = grantedWarned
	cfg.Impersonate = rest.ImpersonationConfig{UserName: granted, Groups: []string{"system:authenticated"}}
	asGranted, err := client.New(cfg, client.Options{Scheme: e.client.Scheme()})
	if err != nil {
		return err
	}
	pod := testPod(ns, "granted", e.b.BaseImage)
	pod.Spec.NodeName = "control-plane-1"
	tenantWarned := func() bool {
		warned.take()
		probe := testPod(ns, "probe", e.b.BaseImage)
		probe.Spec.NodeName = "control-plane-1"
		return asTenant.Create(ctx, probe, client.DryRunAll) == nil &&
			slices.ContainsFunc(warned.take(), func(w string) bool { return strings.Contains(w, "protected node group") })
	}
	return poll(ctx, "a pod of the user granted use admitted without a warning", func() (bool, error) {
		if !tenantWarned() {
			return false, nil
		}
		grantedWarned.take()
		if err := asGranted.Create(ctx, pod.DeepCopy(), client.DryRunAll); err != nil {
			return false, err
		}
		got := grantedWarned.take()
		return len(got) == 0 && tenantWarned(), nil
	})
}

// protectionStatusWritten changes the ControlPlaneProtection's spec (an
// authorized user named after the case, taken out again after) and waits
// for the status of that generation: the component writes it.
func protectionStatusWritten(ctx context.Context, c client.Client, probe string) error {
	cpp := &unstructured.Unstructured{}
	cpp.SetGroupVersionKind(schedulingv1alpha1.GroupVersion.WithKind("ControlPlaneProtection"))
	key := client.ObjectKey{Name: schedulingv1alpha1.ControlPlaneProtectionName}
	users := func(add bool) error {
		if err := c.Get(ctx, key, cpp); err != nil {
			return err
		}
		groups, _, _ := unstructured.NestedSlice(cpp.Object, "spec", "groups")
		g := groups[0].(map[string]any)
		list, _, _ := unstructured.NestedStringSlice(g, "authorizedUsers")
		list = slices.DeleteFunc(list, func(u string) bool { return u == "rbac-probe:"+probe })
		if add {
			list = append(list, "rbac-probe:"+probe)
		}
		if err := unstructured.SetNestedStringSlice(g, list, "authorizedUsers"); err != nil {
			return err
		}
		groups[0] = g
		if err := unstructured.SetNestedSlice(cpp.Object, groups, "spec", "groups"); err != nil {
			return err
		}
		return c.Update(ctx, cpp)
	}
	if err := users(true); err != nil {
		return err
	}
	generation := cpp.GetGeneration()
	defer func() { _ = users(false) }()
	return poll(ctx, "the ControlPlaneProtection's status of generation "+strconv.FormatInt(generation, 10), func() (bool, error) {
		if err := c.Get(ctx, key, cpp); err != nil {
			return false, err
		}
		observed, _, _ := unstructured.NestedInt64(cpp.Object, "status", "observedGeneration")
		return observed >= generation, nil
	})
}

// warningCatcher keeps the apiserver's warnings (rest.WarningHandler).
type warningCatcher struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCatcher) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings so far and forgets them.
func (w *warningCatcher) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// metricsCase scrapes each Deployment's metrics endpoint as a new service
// account bound to archway-metrics-reader.
func metricsCase(ctx context.Context, e *rbacEnv, deps []string) error {
	c := e.client
	ns, err := caseNamespace(ctx, e, "metrics")
	if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}}
	if err := c.Create(ctx, sa); err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "archway-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}},
	}
	if err := c.Create(ctx, crb); err != nil {
		return err
	}
	defer func() { _ = c.Delete(context.WithoutCancel(ctx), crb) }()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return err
	}
	for _, dep := range deps {
		err := poll(ctx, "scraping "+dep, func() (bool, error) {
			ip, err := e.podIP(ctx, dep)
			if err != nil {
				return false, err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(ip, "8443")+"/metrics", nil)
			if err != nil {
				return false, err
			}
			req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
			resp, err := e.http.Do(req)
			if err != nil {
				return false, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false, fmt.Errorf("%s", resp.Status)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// servingCerts are, per webhook Deployment, its certificate Secret and
// the webhook configurations it injects its CA into.
var servingCerts = map[string]struct {
	secret  string
	configs []client.Object
}{
	"archway-build-triggers": {secret: "archway-build-triggers-tls", configs: []client.Object{apiService(paths.APIServiceName),
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "archway-build-image-streams"}},
	}},
	"archway-placement-webhook": {secret: "archway-placement-webhook-tls", configs: []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "archway-pod-placement"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "archway-pod-placement-validation"}},
	}},
	"archway-scheduling-policy": {secret: "archway-scheduling-policy-webhook-tls", configs: []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "archway-scheduling-policy"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "archway-scheduling-policy-validation"}},
	}},
	"archway-control-plane-protection": {secret: "archway-control-plane-protection-webhook-tls", configs: []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "archway-control-plane-protection"}},
	}},
	// The placement operator's conversion webhook: its CA goes into the
	// ClusterPodPlacementConfig CRD.
	"archway-placement-operator": {secret: "archway-placement-operator-tls", configs: []client.Object{crdObject(placement.ClusterPodPlacementConfigCRDName)}},
}

// crdObject is a CustomResourceDefinition to read whole.
func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName(name)
	return u
}

// apiService is an APIService to read (the bed's scheme has no
// apiregistration types).
func apiService(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	u.SetName(name)
	return u
}

// certsCase empties each webhook Deployment's certificate Secret: the
// component makes a new CA and certificate, writes them into its Secret
// and injects the CA into its webhook configurations.
func certsCase(ctx context.Context, e *rbacEnv, deps []string) error {
	c := e.client
	for _, dep := range deps {
		certs, ok := servingCerts[dep]
		if !ok {
			continue
		}
		secret := &corev1.Secret{}
		key := client.ObjectKey{Namespace: namespace, Name: certs.secret}
		var old []byte
		// Again on a conflict: a component just restarted may be filling
		// its Secret at that moment.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, key, secret); err != nil {
				return err
			}
			old = secret.Data["ca.crt"]
			secret.Data = nil
			return c.Update(ctx, secret)
		}); err != nil {
			return err
		}
		var ca []byte
		if err := poll(ctx, dep+" renews its certificate", func() (bool, error) {
			if err := c.Get(ctx, key, secret); err != nil {
				return false, err
			}
			ca = secret.Data["ca.crt"]
			return len(ca) > 0 && len(secret.Data["tls.crt"]) > 0 && !bytes.Equal(ca, old), nil
		}); err != nil {
			return err
		}
		for _, cfg := range certs.configs {
			cfg := cfg.DeepCopyObject().(client.Object)
			if err := poll(ctx, dep+" injects its CA into "+cfg.GetName(), func() (bool, error) {
				if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err != nil {
					return false, err
				}
				var bundles [][]byte
				switch w := cfg.(type) {
				case *admissionregistrationv1.MutatingWebhookConfiguration:
					for _, h := range w.Webhooks {
						bundles = append(bundles, h.ClientConfig.CABundle)
					}
				case *admissionregistrationv1.ValidatingWebhookConfiguration:
					for _, h := range w.Webhooks {
						bundles = append(bundles, h.ClientConfig.CABundle)
					}
				case *unstructured.Unstructured: // an APIService, or a CRD's conversion webhook
					path := []string{"spec", "caBundle"}
					if w.GetKind() == "CustomResourceDefinition" {
						path = []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}
					}
					if b64, ok, _ := unstructured.NestedString(w.Object, path...); ok {
						bundle, err := base64.StdEncoding.DecodeString(b64)
						if err != nil {
							return false, err
						}
						bundles = append(bundles, bundle)
					}
				}
				return len(bundles) > 0 && !slices.ContainsFunc(bundles, func(b []byte) bool { return !bytes.Equal(b, ca) }), nil
			}); err != nil {
				return err
			}
		}
		if dep == "archway-placement-operator" {
			// The apiserver converts through the webhook with that CA.
			if err := ensureConfig(ctx, e); err != nil {
				return err
			}
			if err := poll(ctx, "reading the ClusterPodPlacementConfig as v1alpha1", func() (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(e.cppc), &multiarchv1alpha1.ClusterPodPlacementConfig{})
				return err == nil, err
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// olmCase labels the ClusterPodPlacementConfig CRD as OLM labels the
// multiarch tuning operator's: the placement operator (restarted by the
// proof, so that it has recorded nothing yet) records the Warning event
// that says it leaves the CRD alone. The label is removed after.
func olmCase(ctx context.Context, e *rbacEnv, _ []string) error {
	c := e.client
	crd := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: placement.ClusterPodPlacementConfigCRDName},
	}
	label := func(ctx context.Context, v any) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"olm.managed": v}}})
		if err != nil {
			return err
		}
		return c.Patch(ctx, crd.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	}
	since := time.Now().Add(-time.Second)
	if err := label(ctx, "true"); err != nil {
		return err
	}
	defer func() { _ = label(context.WithoutCancel(ctx), nil) }()
	return poll(ctx, "the placement operator's CRDOwnedByOLM event", func() (bool, error) {
		var events eventsv1.EventList
		if err := c.List(ctx, &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(ev eventsv1.Event) bool {
			return ev.Reason == "CRDOwnedByOLM" && ev.Regarding.Name == crd.Name && ev.EventTime.After(since)
		}), nil
	})
}

// operands are the Deployments the placement operator scales, each with
// a ClusterRole of its name that it binds to the service account of its
// name while the ClusterPodPlacementConfig exists.
var operands = []string{placement.ControllerName, placement.WebhookComponentName}

// leaderLeases are, per leader-elected Deployment, the Leases its leader
// holds: its election's and, for the placement controller, the heartbeat
// the placement webhook gates by.
var leaderLeases = map[string][]string{
	"build-controller":             {"build-controller.archway.dev"},
	"archway-placement-controller": {"archway-placement-controller", placement.HeartbeatLeaseName},
	"archway-placement-operator":   {"archway-placement-operator"},
}

// electionCase deletes the leader-elected Deployments' Leases: the leader
// creates each again.
func electionCase(ctx context.Context, e *rbacEnv, deps []string) error {
	c := e.client
	for _, dep := range deps {
		for _, name := range leaderLeases[dep] {
			lease := &coordinationv1.Lease{}
			key := client.ObjectKey{Namespace: namespace, Name: name}
			if err := poll(ctx, "lease "+name+" held", func() (bool, error) {
				err := c.Get(ctx, key, lease)
				return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != "", client.IgnoreNotFound(err)
			}); err != nil {
				return err
			}
			old := lease.UID
			if err := c.Delete(ctx, lease); client.IgnoreNotFound(err) != nil {
				return err
			}
			if err := poll(ctx, "lease "+name+" created again", func() (bool, error) {
				err := c.Get(ctx, key, lease)
				return err == nil && lease.UID != old && ptr.Deref(lease.Spec.HolderIdentity, "") != "", client.IgnoreNotFound(err)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitEvent waits until a component (its events' reportingController) has
// recorded an event in the namespace: the case then depends on its right to
// create events, not on the order in which its requests reach the log.
func waitEvent(ctx context.Context, c client.Client, ns, controller string) error {
	return poll(ctx, controller+"'s event in "+ns, func() (bool, error) {
		var events eventsv1.EventList
		if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(ev eventsv1.Event) bool { return ev.ReportingController == controller }), nil
	})
}

// hasPreferredArch says whether the pod was placed with a preferred node
// affinity term for the architecture.
func hasPreferredArch(pod *corev1.Pod, arch string) bool {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return false
	}
	for _, term := range pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		for _, expr := range term.Preference.MatchExpressions {
			if expr.Key == corev1.LabelArchStable && slices.Contains(expr.Values, arch) {
				return true
			}
		}
	}
	return false
}
