// Package bed starts and stops archway's test bed: a real kube-apiserver and
// etcd (envtest), the real kube-scheduler, kwok managing fake nodes of every
// architecture, optionally kube-controller-manager, and CNCF Distribution
// registries on loopback seeded with a multi-arch busybox base image. Every
// part is a real program built by hack/tools.sh; a part that cannot start
// fails the caller with a message naming it and the command that installs it.
//
// kwok nodes run nothing: the bed's pod runner (Options.Runner,
// Bed.StartPodRunner) runs the containers of pods bound to them whose images
// it maps to local binaries as processes on this machine, each in a mount
// namespace of its own with the pod's volumes at their mountPaths, reports
// their status as a kubelet would and serves their logs to `kubectl logs`.
// It does not enforce resource requests or limits: a build pod may use the
// whole machine. See Runner for what it does and does not do.
package bed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options choose the parts of a bed. The zero value is the full default bed:
// apiserver, scheduler, kwok with DefaultNodes, one registry with the base
// image, and archway's CRDs installed.
type Options struct {
	// Nodes are the kwok nodes to create; nil means DefaultNodes().
	Nodes []Node
	// WithoutNodes starts neither kwok nor the scheduler, for API-only tests.
	WithoutNodes bool
	// WithoutScheduler leaves pods unbound.
	WithoutScheduler bool
	// ControllerManager starts kube-controller-manager (garbage collector,
	// namespace deletion) for tests that need owner-reference cleanup.
	ControllerManager bool
	// WithoutRegistry starts no registry (and seeds no base image).
	WithoutRegistry bool
	// AuthRegistry starts a second registry that requires htpasswd basic auth.
	AuthRegistry bool
	// Runner starts the pod runner with these options once the nodes are
	// up (see Bed.StartPodRunner); it needs the nodes.
	Runner *RunnerOptions
	// CRDDirectoryPaths are installed at start; nil means archway's generated
	// CRDs in manifests/crd/bases.
	CRDDirectoryPaths []string
	// Dir holds logs, kubeconfig and registry data; empty means a new
	// temporary directory, removed by Stop.
	Dir string
	// AuditServiceAccounts makes the apiserver write an audit log
	// (Bed.AuditLogPath, one JSON event per line, level Metadata) of every
	// request made by a service account: who asked for what, and whether
	// it was allowed.
	AuditServiceAccounts bool
	// OwnerReferencesPermissionEnforcement turns on the admission plugin of
	// that name (on in OpenShift): setting blockOwnerDeletion on an owner
	// reference needs update on the owner's finalizers.
	OwnerReferencesPermissionEnforcement bool
	// RealNode adds a real node (see RealNode): containerd, runc and a
	// kubelet on this machine, joined as node-real-<arch> beside the kwok
	// nodes, with kube-proxy and the controllers real pods need
	// (service accounts, the root CA ConfigMap; it implies
	// ControllerManager). The apiserver and registries then serve on the
	// node's address instead of loopback. Needs root and `hack/tools.sh
	// node`.
	RealNode bool
	// Log receives the one-line summary and progress; nil means os.Stderr.
	Log io.Writer
}

// Bed is a running test bed.
type Bed struct {
	// Dir holds the bed's logs, kubeconfig and registry storage.
	Dir string
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client (no cache) with archway's and
	// Kubernetes' types registered.
	Client client.Client
	// Clientset is a typed client-go clientset for the core APIs.
	Clientset kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for kubectl and programs.
	Kubeconfig string
	// Nodes are the nodes kwok manages.
	Nodes []Node
	// Registry is a plain-HTTP registry on loopback (nil WithoutRegistry).
	Registry *Registry
	// AuthRegistry requires basic auth (nil unless Options.AuthRegistry).
	AuthRegistry *Registry
	// BaseImage is the multi-arch busybox index seeded into Registry, e.g.
	// "127.0.0.1:40123/archway/busybox:latest".
	BaseImage string
	// Runner is the pod runner started by Options.Runner or the latest
	// StartPodRunner (nil without one).
	Runner *Runner
	// AuditLogPath is the apiserver's audit log (Options.AuditServiceAccounts;
	// empty without it).
	AuditLogPath string
	// Node is the real node (Options.RealNode; nil without it).
	Node *RealNode
	// FrontProxy is the apiserver's front-proxy CA, which aggregated APIs
	// verify the apiserver by.
	FrontProxy *FrontProxy

	env     *envtest.Environment
	kwok    *process
	kubelet *kubeletServer // the nodes' kubelet endpoint (nil without nodes)
	runners []*Runner
	procs   []*process // started in order; stopped in reverse
	ownDir  bool
	log     io.Writer
	stopped bool
	subnets []string // claimed by ServiceAddress; released by Stop
}

// Start brings a bed up. On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Bed, err error) {
	start := time.Now()
	b := &Bed{Dir: opts.Dir, log: opts.Log}
	if b.log == nil {
		b.log = os.Stderr
	}
	if b.Dir == "" {
		if b.Dir, err = os.MkdirTemp("", "archway-bed-"); err != nil {
			return nil, err
		}
		b.ownDir = true
	} else if err := os.MkdirAll(b.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.Stop()
		}
	}()
	if opts.RealNode {
		// The node's network first: the apiserver serves on its address.
		if b.Node, err = claimNodeNetwork(); err != nil {
			return nil, fmt.Errorf("bed: real node: %w", err)
		}
		opts.ControllerManager = true
	}
	if err := b.startAPIServer(opts); err != nil {
		return nil, fmt.Errorf("bed: kube-apiserver/etcd: %w", err)
	}
	var parts []string
	parts = append(parts, "apiserver "+b.Config.Host)
	if opts.ControllerManager {
		if err := b.startControllerManager(ctx); err != nil {
			return nil, fmt.Errorf("bed: kube-controller-manager: %w", err)
		}
		parts = append(parts, "controller-manager")
	}
	if !opts.WithoutNodes {
		if !opts.WithoutScheduler {
			if err := b.startScheduler(ctx); err != nil {
				return nil, fmt.Errorf("bed: kube-scheduler: %w", err)
			}
			parts = append(parts, "scheduler")
		}
		nodes := opts.Nodes
		if nodes == nil {
			nodes = DefaultNodes()
		}
		if err := b.startKwok(ctx, nodes); err != nil {
			return nil, fmt.Errorf("bed: kwok: %w", err)
		}
		parts = append(parts, fmt.Sprintf("kwok %d nodes", len(nodes)))
	}
	if opts.Runner != nil {
		if opts.WithoutNodes {
			return nil, errors.New("bed: Options.Runner needs the nodes: WithoutNodes is set")
		}
		if _, err := b.StartPodRunner(ctx, *opts.Runner); err != nil {
			return nil, err
		}
		parts = append(parts, "pod runner")
	}
	regOpts := RegistryOptions{}
	if b.Node != nil {
		regOpts.Address = b.Node.IP
	}
	if !opts.WithoutRegistry {
		if b.Registry, err = startRegistry(ctx, b.Dir, "registry", false, regOpts); err != nil {
			return nil, fmt.Errorf("bed: registry: %w", err)
		}
		b.procs = append(b.procs, b.Registry.proc)
		parts = append(parts, "registry "+b.Registry.Host)
		if b.BaseImage, err = SeedBaseImage(ctx, b.Registry); err != nil {
			return nil, fmt.Errorf("bed: base image: %w", err)
		}
		parts = append(parts, "base "+b.BaseImage)
	}
	if opts.AuthRegistry {
		if b.AuthRegistry, err = startRegistry(ctx, b.Dir, "auth-registry", true, regOpts); err != nil {
			return nil, fmt.Errorf("bed: auth registry: %w", err)
		}
		b.procs = append(b.procs, b.AuthRegistry.proc)
		parts = append(parts, "auth-registry "+b.AuthRegistry.Host)
	}
	if b.Node != nil {
		if b.Registry == nil {
			return nil, errors.New("bed: Options.RealNode needs the registry (its pause image): WithoutRegistry is set")
		}
		pause, err := b.pushPauseImage(ctx)
		if err != nil {
			return nil, fmt.Errorf("bed: real node: pause image: %w", err)
		}
		if err := b.startRealNode(ctx, b.Node, pause); err != nil {
			return nil, fmt.Errorf("bed: real node: %w", err)
		}
		parts = append(parts, "real node "+b.Node.Name+" "+b.Node.IP)
	}
	fmt.Fprintf(b.log, "bed: up in %.1fs: %s; KUBECONFIG=%s\n",
		time.Since(start).Seconds(), strings.Join(parts, ", "), b.Kubeconfig)
	return b, nil
}

// Stop stops every part, children before the apiserver (else envtest's stop
// waits on their connections), and removes a temporary Dir. It is safe to
// call more than once.
func (b *Bed) Stop() error {
	if b == nil || b.stopped {
		return nil
	}
	b.stopped = true
	// The pods' processes first, while the apiserver still answers.
	for _, r := range b.runners {
		r.Stop()
	}
	b.kubelet.Close()
	for i := len(b.procs) - 1; i >= 0; i-- {
		b.procs[i].Stop()
	}
	var errs []error
	if b.env != nil {
		if err := b.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping kube-apiserver/etcd: %w", err))
		}
	}
	// The node's network last: the apiserver serves on its address until
	// it has stopped.
	b.Node.stop()
	for _, prefix := range b.subnets {
		releasePodSubnet(prefix)
	}
	if b.ownDir {
		if err := os.RemoveAll(b.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LogPath is the log file of one of the bed's programs ("kube-scheduler",
// "kwok", "registry", ...).
func (b *Bed) LogPath(name string) string {
	return filepath.Join(b.Dir, name+".log")
}

// Addresses lists the host:port of every server the bed runs (apiserver,
// etcd, scheduler, kwok, registries...), for checks that they are gone.
func (b *Bed) Addresses() []string {
	var addrs []string
	if b.Config != nil {
		if u, err := url.Parse(b.Config.Host); err == nil {
			addrs = append(addrs, u.Host)
		}
	}
	if b.env != nil && b.env.ControlPlane.Etcd != nil && b.env.ControlPlane.Etcd.URL != nil {
		addrs = append(addrs, b.env.ControlPlane.Etcd.URL.Host)
	}
	if b.kubelet != nil {
		addrs = append(addrs, b.kubelet.Addr())
	}
	for _, p := range b.procs {
		if p.addr != "" {
			addrs = append(addrs, p.addr)
		}
	}
	return addrs
}
