package framework

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/test/bed"
)

// Installing archway onto the bed the way a cluster administrator does,
// with `kubectl apply -k`, every component running as pods under its own
// service account: the pod runner maps archway's images to the locally
// built binaries and gives each pod its service account's token. The
// install test and `make demo INSTALL=1` share it.

const (
	// InstallNamespace is the namespace manifests/default installs into.
	InstallNamespace = "archway-system"
	// ControllerRepository is the repository of build-controller's image in
	// manifests/default.
	ControllerRepository = "ghcr.io/archway-build/build-controller"
	// InstallTimeout bounds the wait for the installed components.
	InstallTimeout = 3 * time.Minute
)

// ServingSecrets are the Secrets (shipped empty) the webhook Deployments
// fill with their serving certificates (--cert-management=internal), with
// their Services, and WebhookConfigs the webhook configurations (with how
// many webhooks each has) whose caBundle they inject: nobody provides
// either by hand.
var (
	ServingSecrets = map[string]string{
		"archway-placement-webhook-tls":                "archway-placement-webhook",
		"archway-control-plane-protection-webhook-tls": "archway-control-plane-protection-webhook",
		"archway-scheduling-policy-webhook-tls":        "archway-scheduling-policy-webhook",
		"archway-build-triggers-tls":                   "archway-build-triggers",
	}
	// APIServices are archway's aggregated APIs: Available once their
	// server runs and its CA is injected.
	APIServices    = []string{"v1alpha1.triggers.archway.dev"}
	WebhookConfigs = []struct {
		Kind, Name string
		Webhooks   int
	}{
		{"MutatingWebhookConfiguration", "archway-pod-placement", 1},
		{"ValidatingWebhookConfiguration", "archway-pod-placement-validation", 2},
		{"ValidatingWebhookConfiguration", "archway-control-plane-protection", 3},
		{"MutatingWebhookConfiguration", "archway-scheduling-policy", 2},
		{"ValidatingWebhookConfiguration", "archway-scheduling-policy-validation", 4},
	}
)

// InstallBed is a bed ready for `kubectl apply -k`: no CRDs installed,
// kube-controller-manager running the Deployments, and the pod runner
// mapping archway's images to the binaries.
type InstallBed struct {
	Bed *bed.Bed
	// BuilderImage is the builder image the overlay's config names (in the
	// bed's registry's host, never pulled: the runner maps it).
	BuilderImage string
	// Base is the install WriteOverlay's overlay is made of; default
	// manifests/default. A release overlay (make release-manifests) of
	// images pushed as <ImageRegistry>/<name> is run just the same.
	Base string
	// ImageRegistry is where images named as make images names them
	// (<ImageRegistry>/build-controller, .../builder, any tag or digest)
	// are mapped to the binaries.
	ImageRegistry string
}

// StartInstallBed checks qemu, starts a bed for installing archway into
// and its pod runner, which runs bins for archway's images with in-cluster
// configuration and an IP per pod. dir holds the git configuration the
// runner's pods read. On error everything started is stopped.
func StartInstallBed(ctx context.Context, bins Binaries, dir string, opts bed.Options) (*InstallBed, error) {
	return StartInstallBedImages(ctx, bins, nil, dir, opts)
}

// StartInstallBedImages is StartInstallBed whose pod runner also maps the
// images of more (as RunnerOptions.Images), e.g. an earlier release's
// binaries under images of their own.
func StartInstallBedImages(ctx context.Context, bins Binaries, more map[string]string, dir string, opts bed.Options) (*InstallBed, error) {
	if err := bed.CheckQemu(); err != nil {
		return nil, err
	}
	// The git sources are file:// repositories owned by the host's root,
	// who is no one in a pod's user namespace (see Start).
	gitConfig := filepath.Join(dir, "gitconfig")
	if err := os.WriteFile(gitConfig, []byte("[safe]\n\tdirectory = *\n"), 0o644); err != nil {
		return nil, err
	}
	if err := bed.SearchableByOthers(dir); err != nil {
		return nil, err
	}
	opts.ControllerManager = true
	// kubectl installs the CRDs.
	opts.CRDDirectoryPaths = []string{}
	b, err := bed.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	imageRegistry := b.Registry.Host + "/archway"
	builderImage := imageRegistry + "/builder:install"
	images := map[string]string{
		ControllerRepository:                bins.Controller,
		imageRegistry + "/build-controller": bins.Controller,
		imageRepository(builderImage):       bins.Builder,
	}
	maps.Copy(images, more)
	if _, err := b.StartPodRunner(ctx, bed.RunnerOptions{
		Images:          images,
		Env:             []string{"GIT_CONFIG_SYSTEM=" + gitConfig},
		InClusterConfig: true,
		PodIPs:          true,
	}); err != nil {
		_ = b.Stop()
		return nil, err
	}
	return &InstallBed{Bed: b, BuilderImage: builderImage, ImageRegistry: imageRegistry,
		Base: filepath.Join(bed.RepoRoot(), "manifests", "default")}, nil
}

// Kubectl runs the bed's kubectl with its kubeconfig; the error holds the
// command and its output.
func (ib *InstallBed) Kubectl(ctx context.Context, args ...string) (string, error) {
	return BedKubectl(ctx, ib.Bed, args...)
}

// BedKubectl runs the bed's kubectl with b's kubeconfig; the error holds
// the command and its output.
func BedKubectl(ctx context.Context, b *bed.Bed, args ...string) (string, error) {
	bin, err := bed.Tool("kubectl")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", b.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Install runs the install sequence of docs/admin-guide/install.md with
// kubectl: the CRDs, their wait, then the overlay (a kustomization
// directory); then it waits until every component runs and serves
// (WaitInstalled).
func (ib *InstallBed) Install(ctx context.Context, overlay string) error {
	for _, args := range [][]string{
		{"apply", "--server-side", "-k", filepath.Join(bed.RepoRoot(), "manifests", "crd")},
		{"wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"},
		{"apply", "--server-side", "-k", overlay},
	} {
		if _, err := ib.Kubectl(ctx, args...); err != nil {
			return err
		}
	}
	return WaitInstalled(ctx, ib.Bed)
}

// InstallWithPlugin installs with kubectl archway install -k overlay: it
// chooses the CRDs by who serves build.openshift.io (manifests/crd on the
// bed), applies them, waits until they are established and applies the
// overlay; then it waits as Install does. It returns the plugin's output.
func (ib *InstallBed) InstallWithPlugin(ctx context.Context, overlay string) (string, error) {
	var out bytes.Buffer
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"install", "-k", overlay, "--manifests", filepath.Join(bed.RepoRoot(), "manifests"), "--kubeconfig", ib.Bed.Kubeconfig})
	if err := cmd.ExecuteContext(ctx); err != nil {
		return out.String(), fmt.Errorf("kubectl archway install: %w\n%s", err, out.String())
	}
	return out.String(), WaitInstalled(ctx, ib.Bed)
}

// imageRepository is an image reference without its tag.
func imageRepository(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// WriteOverlay writes the bed's overlay of Base (manifests/default) into dir
// (which must exist) and returns dir. It adds only what the bed needs: the
// bed's registry and git settings in the config file, and pod-IP addresses
// for the components' listeners, since the runner's pods share the host's
// network.
func (ib *InstallBed) WriteOverlay(dir string) (string, error) {
	config := fmt.Sprintf(`apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: %s
  allowFileGitURIs: true
placement:
  insecureRegistries: [%q]
`, ib.BuilderImage, ib.Bed.Registry.Host)
	// The runner's pods share the host's network: each component listens
	// on its own pod IP (later flags win), and the runner takes its pods.
	patches := `- target: {kind: Deployment}
  patch: |-
    - {op: add, path: /spec/template/metadata/labels/bed.archway.dev~1manual, value: "true"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--metrics-bind-address=$(POD_IP):8443"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--health-probe-bind-address=$(POD_IP):8081"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--webhook-host=$(POD_IP)"}
- target: {kind: Deployment, name: "archway-placement-.*|build-controller"}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}}
- target: {kind: Deployment, name: "archway-build-triggers|archway-control-plane-protection|archway-scheduling-policy"}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/env, value: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]}
`
	return dir, WriteOverlayFiles(dir, ib.Base, config, patches)
}

// WriteOverlayFiles writes into dir (which must exist) an overlay of base
// (an install: manifests/default or a release overlay): config.yaml
// replacing build-controller's configuration, the kustomize patches given
// (a YAML list, or empty), and manifests/default's sortOptions.
func WriteOverlayFiles(dir, base, config, patches string) error {
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(config), 0o600); err != nil {
		return err
	}
	// kustomize takes bases by relative path only.
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return err
	}
	var k strings.Builder
	fmt.Fprintf(&k, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
configMapGenerator:
- name: build-controller-config
  namespace: %s
  behavior: replace
  files: [config.yaml]
`, rel, InstallNamespace)
	if patches != "" {
		k.WriteString("patches:\n" + patches)
	}
	order, err := DefaultSortOptions()
	if err != nil {
		return err
	}
	k.WriteString(order)
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o600)
}

// DefaultSortOptions is the sortOptions section of manifests/default's
// kustomization, the order kubectl delete -k relies on, for an overlay to
// repeat (sortOptions apply to the kustomization built, not to its bases).
func DefaultSortOptions() (string, error) {
	def, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "default", "kustomization.yaml"))
	if err != nil {
		return "", err
	}
	i := bytes.Index(def, []byte("\nsortOptions:"))
	if i < 0 {
		return "", fmt.Errorf("manifests/default/kustomization.yaml has no sortOptions")
	}
	return string(def[i+1:]), nil
}

// WaitInstalled waits until every Deployment of archway's namespace has
// its pods running and every webhook Service's pods accept connections,
// for at most InstallTimeout.
func WaitInstalled(ctx context.Context, b *bed.Bed) error {
	return WaitInstalledOf(ctx, b, APIServices)
}

// WaitInstalledOf is WaitInstalled for an install serving the aggregated
// APIs apiServices (an earlier release served fewer).
func WaitInstalledOf(ctx context.Context, b *bed.Bed, apiServices []string) error {
	ctx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	var last error
	for {
		if last = installed(ctx, b, apiServices); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(b.LogPath("pod-runner"))
			return fmt.Errorf("archway is not running: %w\npod runner log (tail):\n%s", last, Tail(string(log), 40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func installed(ctx context.Context, b *bed.Bed, apiServices []string) error {
	var deps appsv1.DeploymentList
	if err := b.Client.List(ctx, &deps, client.InNamespace(InstallNamespace)); err != nil {
		return err
	}
	if len(deps.Items) < 6 {
		return fmt.Errorf("%d Deployments", len(deps.Items))
	}
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods, client.InNamespace(InstallNamespace)); err != nil {
		return err
	}
	running := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			running[p.Labels["app.kubernetes.io/name"]]++
		}
	}
	for _, d := range deps.Items {
		if n := running[d.Spec.Selector.MatchLabels["app.kubernetes.io/name"]]; n < int(*d.Spec.Replicas) {
			return fmt.Errorf("deployment %s: %d of %d pods running", d.Name, n, *d.Spec.Replicas)
		}
	}
	// The certificates are made in-process: every Secret filled and every
	// webhook's caBundle injected.
	for name := range ServingSecrets {
		var s corev1.Secret
		if err := b.Client.Get(ctx, client.ObjectKey{Namespace: InstallNamespace, Name: name}, &s); err != nil {
			return err
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return fmt.Errorf("secret %s holds no certificate", name)
		}
	}
	for _, w := range WebhookConfigs {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("admissionregistration.k8s.io/v1")
		u.SetKind(w.Kind)
		if err := b.Client.Get(ctx, client.ObjectKey{Name: w.Name}, u); err != nil {
			return err
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		if len(hooks) != w.Webhooks {
			return fmt.Errorf("%s %s has %d webhooks, want %d", w.Kind, w.Name, len(hooks), w.Webhooks)
		}
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			if bundle, _, _ := unstructured.NestedString(hm, "clientConfig", "caBundle"); bundle == "" {
				return fmt.Errorf("%s %s: no caBundle injected", w.Kind, w.Name)
			}
		}
	}
	for _, svc := range ServingSecrets {
		var s corev1.Service
		if err := b.Client.Get(ctx, client.ObjectKey{Namespace: InstallNamespace, Name: svc}, &s); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || !selects(s.Spec.Selector, p.Labels) {
				continue
			}
			c, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "9443"), time.Second)
			if err != nil {
				return fmt.Errorf("%s's pod %s does not serve: %w", svc, p.Name, err)
			}
			_ = c.Close()
		}
	}
	for _, name := range apiServices {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiregistration.k8s.io/v1")
		u.SetKind("APIService")
		if err := b.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		available := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			available = available || (m["type"] == "Available" && m["status"] == "True")
		}
		if !available {
			return fmt.Errorf("APIService %s is not Available: %v", name, conds)
		}
	}
	return nil
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// DumpPods logs, through logf, every pod's phase and its log's tail, the
// Endpoints and kube-controller-manager's log: what explains a failed
// install.
func DumpPods(logf func(format string, args ...any), b *bed.Bed) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods); err != nil {
		logf("%v", err)
		return
	}
	bin, err := bed.Tool("kubectl")
	if err != nil {
		return
	}
	for _, kind := range []string{"endpoints", "endpointslices", "pods -o wide"} {
		out, _ := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", b.Kubeconfig, "get", "-n", InstallNamespace, "-o", "wide"}, strings.Fields(kind)...)...).CombinedOutput()
		logf("%s:\n%s", kind, out)
	}
	if kcm, err := os.ReadFile(b.LogPath("kube-controller-manager")); err == nil {
		logf("kube-controller-manager (tail):\n%s", Tail(string(kcm), 30))
	}
	for _, p := range pods.Items {
		out, _ := exec.CommandContext(ctx, bin, "--kubeconfig", b.Kubeconfig, "logs", "-n", p.Namespace, p.Name, "--all-containers", "--tail=15").CombinedOutput()
		logf("pod %s/%s on %s, %s, gates %v, ip %s:\n%s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.SchedulingGates, p.Status.PodIP, out)
	}
}
