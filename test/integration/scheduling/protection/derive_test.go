package protection

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
)

// policyEntries are entries of the shipped list that the exercise below
// does not derive, each for a reason the list's comments give.
var policyEntries = []string{
	// archway's own namespace (the webhook configuration does not even
	// send it, as it does not send kube-system's): its pods may run on
	// control-plane nodes like other add-ons.
	"archway-system/build-controller",
	// Every kubelet, for the mirror pods of its static pods; derived here
	// as system:node:control-plane-1.
	"system:node:*",
	// The namespaces of widely used network add-ons outside kube-system,
	// each exercised by TestNetworkAddOnDaemonSets.
	"kube-flannel/flannel",
	"calico-system/calico-node",
	"tigera-operator/tigera-operator",
}

// TestDeriveAuthorizedList runs the control-plane components that put pods
// on control-plane nodes (kube-scheduler, every kube-controller-manager
// controller that creates pods or their owners: DaemonSet,
// Deployment/ReplicaSet, StatefulSet, Job, CronJob, ReplicationController,
// under their own service accounts, a kubelet's mirror pod) with mode
// Inform and an empty
// authorized list, in a namespace of an add-on (as a CNI or a log agent
// outside kube-system has), records every identity the webhook reported as
// unauthorized, and checks the shipped list has exactly those requesters
// plus the policy entries; the add-on's namespace is the one entry a
// cluster adds for its own add-ons. Then, with the shipped list and that
// entry in mode Enable, the same workloads get their pods created and bound
// to control-plane-1, and so do they in kube-system with the shipped list
// alone (the webhook is not sent kube-system's pods).
func TestDeriveAuthorizedList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	kcm, err := startComponent(ctx, "kube-controller-manager", "system:kube-controller-manager", nil, controllerManagerArgs)
	if err != nil {
		t.Fatal(err)
	}
	defer kcm.stop()
	addons, err := testBed.CreateNamespace(ctx, "addons")
	if err != nil {
		t.Fatal(err)
	}

	if err := setConfig(ctx, schedulingv1alpha1.ModeInform, nil); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Second)
	exerciseControlPlane(ctx, t, "derive", addons, true)
	derived := unauthorizedIdentities(ctx, t, addons, "derive", since)
	t.Logf("identities that needed an exception: %s", strings.Join(derived, ", "))
	addonsEntry := addons + "/default"
	if !slices.Contains(derived, addonsEntry) {
		t.Errorf("the add-on's namespace was not reported: derived %v, want %q among them", derived, addonsEntry)
	}
	derived = slices.DeleteFunc(derived, func(e string) bool { return e == addonsEntry })

	shipped, err := shippedConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := shipped.Spec.Groups[0].AuthorizedUsers
	for _, d := range derived {
		kubelet := d == "system:node:"+controlPlaneNode && slices.Contains(want, "system:node:*")
		if !slices.Contains(want, d) && !kubelet {
			t.Errorf("derived %q is not on the shipped list %v", d, want)
		}
	}
	for _, w := range want {
		if !slices.Contains(derived, w) && !slices.Contains(policyEntries, w) {
			t.Errorf("shipped entry %q was not needed by any component and is no policy entry", w)
		}
	}

	// Enforcing with the shipped list, every component still works: in the
	// add-on's namespace once the cluster has authorized it, in
	// kube-system as shipped.
	useConfig(t, schedulingv1alpha1.ModeEnable, addonsEntry)
	exerciseControlPlane(ctx, t, "enforced", addons, true)
	useConfig(t, schedulingv1alpha1.ModeEnable)
	exerciseControlPlane(ctx, t, "system", metav1.NamespaceSystem, false)
}

// exerciseControlPlane creates, in namespace ns, a DaemonSet tolerating
// every taint (as kube-proxy or a CNI does), a Deployment, a StatefulSet, a
// Job, a ReplicationController and (with cron) a CronJob for control-plane
// nodes, and a kubelet's mirror pod, and waits until each has a pod on
// control-plane-1. A controller's FailedCreate event naming the webhook
// fails it at once. The CronJob's first Job starts at the next minute.
func exerciseControlPlane(ctx context.Context, t *testing.T, prefix, ns string, cron bool) {
	t.Helper()
	labels := func(app string) map[string]string { return map[string]string{"app": prefix + "-" + app} }
	template := func(app string, controlPlaneOnly bool) corev1.PodTemplateSpec {
		spec := makePod(ns, "").obj().Spec
		if controlPlaneOnly {
			spec.NodeSelector = map[string]string{bed.ControlPlaneLabel: ""}
			spec.Tolerations = []corev1.Toleration{{Key: bed.ControlPlaneLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		} else {
			spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels(app)}, Spec: spec}
	}
	runOnce := func(app string) corev1.PodTemplateSpec {
		tmpl := template(app, true)
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		return tmpl
	}
	apps := []string{"ds", "deploy", "sts", "job", "rc"}
	objs := []client.Object{
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-ds"},
			Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels("ds")}, Template: template("ds", false)},
		},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-deploy"},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels("deploy")}, Template: template("deploy", true)},
		},
		&appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-sts"},
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels("sts")}, Template: template("sts", true)},
		},
		&batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-job"},
			Spec:       batchv1.JobSpec{Template: runOnce("job")},
		},
		&corev1.ReplicationController{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-rc"},
			Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](1), Selector: labels("rc"), Template: func() *corev1.PodTemplateSpec {
				tmpl := template("rc", true)
				return &tmpl
			}()},
		},
	}
	if cron {
		apps = append(apps, "cron")
		objs = append(objs, &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "-cron"},
			Spec: batchv1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent, JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Template: runOnce("cron")},
			}},
		})
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = k8s.Delete(context.Background(), o, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
		_ = k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0),
			client.MatchingLabels{"mirror": prefix})
	})
	// A static pod's mirror, as the control-plane node's kubelet makes it.
	mirror := makePod(ns, prefix+"-mirror-"+controlPlaneNode).nodeName(controlPlaneNode).obj()
	mirror.Labels = map[string]string{"mirror": prefix}
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "static"}
	if err := as(t, "system:node:"+controlPlaneNode).Create(ctx, mirror); err != nil {
		t.Fatalf("mirror pod: %v", err)
	}
	for _, app := range apps {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			if denial := webhookDenial(ctx, ns, prefix+"-"+app); denial != "" {
				return false, fmt.Errorf("%s", denial)
			}
			pods := &corev1.PodList{}
			if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels(app))); err != nil {
				return false, nil
			}
			return slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == controlPlaneNode }), nil
		})
		if err != nil {
			t.Fatalf("%s-%s has no pod bound to %s: %v", prefix, app, controlPlaneNode, err)
		}
	}
}

// webhookDenial is the message of a controller's event in ns about an
// object whose name starts with prefix saying the protection webhook
// denied a pod it created ("" when there is none).
func webhookDenial(ctx context.Context, ns, prefix string) string {
	list := &corev1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		return ""
	}
	for _, e := range list.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, prefix) && strings.Contains(e.Message, protection.PodsWebhookName) {
			return fmt.Sprintf("%s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
	return ""
}

var (
	requesterRe = regexp.MustCompile(`the requesting user "([^"]+)"`)
	namespaceRe = regexp.MustCompile(`the pod's namespace "([^"]+)"`)
)

// unauthorizedIdentities reads the webhook's events about the exercise's
// pods since a time and returns the entries that would have authorized
// them: requesters as user names or namespace/serviceaccount, and each
// pod namespace as namespace/default unless a requester's entry already
// covers it.
func unauthorizedIdentities(ctx context.Context, t *testing.T, ns, prefix string, since time.Time) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	namespaces := map[string]bool{}
	for _, e := range list.Items {
		if e.Reason != protection.EventUnauthorizedPlacement || !strings.HasPrefix(e.Regarding.Name, prefix+"-") || e.EventTime.Time.Before(since) {
			continue
		}
		if m := requesterRe.FindStringSubmatch(e.Note); m != nil {
			entry := m[1]
			if ns, name, err := serviceaccount.SplitUsername(entry); err == nil {
				entry = ns + "/" + name
			}
			set[entry] = true
		}
		if m := namespaceRe.FindStringSubmatch(e.Note); m != nil {
			namespaces[m[1]] = true
		}
	}
	for ns := range namespaces {
		covered := false
		for entry := range set {
			covered = covered || strings.HasPrefix(entry, ns+"/")
		}
		if !covered {
			set[ns+"/default"] = true
		}
	}
	out := make([]string, 0, len(set))
	for e := range set {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}
