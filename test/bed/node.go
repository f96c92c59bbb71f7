package bed

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"
	imgspec "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/oci/layout"
	"go.podman.io/image/v5/types"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RealNode is the bed's real node: a kubelet joined to the bed's apiserver,
// running pods as real containers with containerd 2 and runc, their network
// a bridge of its own (the node's address is the bridge's), and kube-proxy
// making Services' cluster IPs reachable from them. It has this machine's
// architecture (the kubelet writes its own kubernetes.io/arch); the other
// architectures stay kwok nodes.
//
// Because pods on the bridge reach the host only at the node's address, a
// bed with a real node serves its apiserver and registries there too (not
// on loopback), with an apiserver certificate that also names the
// kubernetes Service's cluster IP; its registries speak plain HTTP, which
// containerd is told, and which programs in pods must be told as they would
// for any plain-HTTP registry of a cluster.
type RealNode struct {
	// Name is the Node's name, "node-real-<arch>".
	Name string
	// IP is the node's address: the gateway of its pod bridge.
	IP string
	// PodCIDR is the subnet its pods' addresses come from.
	PodCIDR string
	// Dir holds the node's configuration and state (containerd's root,
	// the kubelet's root, CNI state).
	Dir string
	// ContainerdSocket is containerd's API socket.
	ContainerdSocket string

	bridge     string
	lock       *os.File // the machine's real-node lock, held while it runs
	containerd *process
	kubelet    *process
	proxy      *process
}

// NoUserNamespaceRuntimeClass is the RuntimeClass of the real node's runtime
// handler runc-nouserns: runc that drops a pod's user namespace
// (test/bed/cmd/runc-nouserns), as runtimes that ignore hostUsers: false
// do, for tests of what happens on such nodes.
const NoUserNamespaceRuntimeClass = "archway-bed-nouserns"

// realNodeName is the name of the real node on this machine's architecture.
func realNodeName() string { return "node-real-" + runtime.GOARCH }

// realNodeLock is the file a bed with a real node holds locked while it
// runs: one real node per machine.
const realNodeLock = "/run/archway-bed-real-node.lock"

// lockRealNode takes the machine's one real-node lock, or says which
// process holds it. Two real nodes cannot share a machine: each bed's
// kube-proxy rewrites the host's one iptables nat table (and its cleanup
// flushes the other's rules), and both beds' kubernetes Services have the
// address 10.0.0.1, so one bed's pods reach the other bed's apiserver.
// The kernel drops the lock when its process ends, however it ends.
func lockRealNode(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another bed's real node runs on this machine (pid %s, %s): two real nodes "+
				"share the host's iptables and Service addresses and break each other; run one suite with a "+
				"real node at a time", strings.TrimSpace(string(holder)), path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// claimNodeNetwork takes the machine's real-node lock and creates the
// first free bridge archway-rnN with address 10.213.N.1/24 (a bridge of a
// bed killed before its cleanup may still hold a name).
func claimNodeNetwork() (*RealNode, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the real node needs root (network namespaces, mounts, cgroups)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, errors.New("the real node needs ip (iproute2; `make tools` installs it)")
	}
	lock, err := lockRealNode(realNodeLock)
	if err != nil {
		return nil, err
	}
	node, err := claimBridge()
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	node.lock = lock
	return node, nil
}

// claimBridge creates the first free bridge archway-rnN with address
// 10.213.N.1/24: the bridge's name is the claim (creating a link of a name
// that exists fails).
func claimBridge() (*RealNode, error) {
	for n := 0; n < 64; n++ {
		bridge := fmt.Sprintf("archway-rn%d", n)
		out, err := exec.Command("ip", "link", "add", bridge, "type", "bridge").CombinedOutput()
		if err != nil && strings.Contains(string(out), "exists") && reclaimStaleBridge(bridge) {
			out, err = exec.Command("ip", "link", "add", bridge, "type", "bridge").CombinedOutput()
		}
		if err != nil {
			if strings.Contains(string(out), "exists") {
				continue
			}
			return nil, fmt.Errorf("ip link add %s type bridge: %w: %s", bridge, err, out)
		}
		// The owner's pid, so that a bed killed before its cleanup does
		// not hold the name forever.
		if err := os.WriteFile(bridgeOwnerFile(bridge), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			_ = exec.Command("ip", "link", "del", bridge).Run()
			return nil, err
		}
		node := &RealNode{
			Name:    realNodeName(),
			IP:      fmt.Sprintf("10.213.%d.1", n),
			PodCIDR: fmt.Sprintf("10.213.%d.0/24", n),
			bridge:  bridge,
		}
		for _, args := range [][]string{
			{"addr", "add", node.IP + "/24", "dev", bridge},
			{"link", "set", bridge, "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				node.deleteBridge()
				return nil, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
			}
		}
		return node, nil
	}
	return nil, errors.New("no free archway-rnN bridge name (64 in use): delete stale ones with `ip link del archway-rnN`")
}

func (n *RealNode) deleteBridge() {
	_ = exec.Command("ip", "link", "del", n.bridge).Run()
	_ = os.Remove(bridgeOwnerFile(n.bridge))
	if n.lock != nil {
		_ = n.lock.Close()
		n.lock = nil
	}
}

// bridgeOwnerFile records which process claimed a bridge.
func bridgeOwnerFile(bridge string) string {
	return filepath.Join(os.TempDir(), bridge+".owner")
}

// reclaimStaleBridge deletes a bridge whose claiming process is gone (a bed
// killed before it could clean up) and reports whether it did.
func reclaimStaleBridge(bridge string) bool {
	data, err := os.ReadFile(bridgeOwnerFile(bridge))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
		return false
	}
	return exec.Command("ip", "link", "del", bridge).Run() == nil
}

// writeAPIServerCerts writes the apiserver's serving certificate (self-signed,
// naming the node's address, loopback and the kubernetes Service's cluster
// IP and DNS names) and service-account signing key into certDir, where
// envtest then uses them instead of making its own, and returns the PEM a
// client trusts.
func writeAPIServerCerts(certDir, nodeIP string) ([]byte, error) {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	crt, key, err := cert.GenerateSelfSignedCertKey("kubernetes",
		[]net.IP{net.ParseIP(nodeIP), net.ParseIP("127.0.0.1"), net.ParseIP(kubernetesServiceIP)},
		[]string{"localhost", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, err
	}
	// The service-account signer: any key, its public half for verifying.
	saKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return nil, err
	}
	saPub, err := publicKeyPEM(saKey)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"apiserver.crt": crt, "apiserver.key": key,
		"sa-signer.key": saKey, "sa-signer.crt": saPub,
	} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return crt, nil
}

// kubernetesServiceIP is the cluster IP of the kubernetes Service: the first
// address of envtest's service range 10.0.0.0/24.
const kubernetesServiceIP = "10.0.0.1"

// publicKeyPEM is the PEM of the public half of a PEM private key.
func publicKeyPEM(privatePEM []byte) ([]byte, error) {
	key, err := keyutil.ParsePrivateKeyPEM(privatePEM)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	der, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// startRealNode starts containerd, the kubelet and kube-proxy of n (whose
// network claimNodeNetwork made) and waits until the Node is Ready.
// sandboxImage is the pause image in the bed's registry.
func (b *Bed) startRealNode(ctx context.Context, n *RealNode, sandboxImage string) error {
	assets, err := AssetsDir()
	if err != nil {
		return err
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "kubelet", "kube-proxy", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"} {
		if _, err := Tool(tool); err != nil {
			return fmt.Errorf("%w (the real node's tools: `hack/tools.sh node`)", err)
		}
	}
	n.Dir = filepath.Join(b.Dir, "node")
	for _, d := range []string{"containerd/root", "containerd/state", "certs.d", "net.d", "cni", "kubelet", "logs"} {
		if err := os.MkdirAll(filepath.Join(n.Dir, d), 0o755); err != nil {
			return err
		}
	}
	// A user-namespaced pod's root is no one on the host, yet runc, in the
	// pod's user namespace, resolves the paths of its root file system and
	// volumes: every directory above them must be searchable by others (a
	// bed's directory is 0700). Without it the sandbox of a hostUsers:
	// false pod fails with "remount-private ... permission denied".
	for _, d := range []string{"containerd/state", "containerd/root", "kubelet"} {
		if err := SearchableByOthers(filepath.Join(n.Dir, d)); err != nil {
			return err
		}
	}
	if err := n.makeCgroupRoot(); err != nil {
		return fmt.Errorf("the kubelet's cgroup root: %w", err)
	}
	if err := n.writeCNIConfig(); err != nil {
		return err
	}
	if err := n.writeRegistryHosts(b.registryHosts()); err != nil {
		return err
	}
	// Socket paths are at most 107 bytes: keep them short.
	n.ContainerdSocket = filepath.Join(n.Dir, "containerd.sock")
	nouserns, err := GoBuild(ctx, n.Dir, "./test/bed/cmd/runc-nouserns")
	if err != nil {
		return err
	}
	config := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(n.containerdConfig(assets, sandboxImage, nouserns)), 0o600); err != nil {
		return err
	}
	// containerd finds its shim, and the shim runc, on PATH.
	path := "PATH=" + assets + ":" + os.Getenv("PATH")
	if n.containerd, err = startProcess("containerd", b.Dir, filepath.Join(assets, "containerd"), []string{"--config", config}, []string{path}); err != nil {
		return err
	}
	b.procs = append(b.procs, n.containerd)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := waitFor(wctx, n.containerd, "containerd's socket", func(context.Context) error {
		c, err := net.Dial("unix", n.ContainerdSocket)
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		return err
	}

	kubeletConfig := filepath.Join(n.Dir, "kubelet.yaml")
	healthz, err := freePort()
	if err != nil {
		return err
	}
	if err := os.WriteFile(kubeletConfig, []byte(n.kubeletConfig(healthz)), 0o600); err != nil {
		return err
	}
	if n.kubelet, err = startProcess("kubelet", b.Dir, filepath.Join(assets, "kubelet"), []string{
		"--config=" + kubeletConfig,
		"--kubeconfig=" + b.Kubeconfig,
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--root-dir=" + filepath.Join(n.Dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.Dir, "kubelet", "pki"),
		"--v=2",
	}, []string{path}); err != nil {
		return err
	}
	b.procs = append(b.procs, n.kubelet)

	proxyMetrics, err := freePort()
	if err != nil {
		return err
	}
	proxyHealth, err := freePort()
	if err != nil {
		return err
	}
	if n.proxy, err = startProcess("kube-proxy", b.Dir, filepath.Join(assets, "kube-proxy"), []string{
		"--kubeconfig=" + b.Kubeconfig,
		"--hostname-override=" + n.Name,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + n.PodCIDR,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(proxyMetrics),
		"--healthz-bind-address=127.0.0.1:" + strconv.Itoa(proxyHealth),
		// Leave the machine's conntrack table size alone.
		"--conntrack-max-per-core=0",
	}, nil); err != nil {
		return err
	}
	b.procs = append(b.procs, n.proxy)

	if err := b.Client.Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: NoUserNamespaceRuntimeClass},
		Handler:    "runc-nouserns",
	}); err != nil {
		return err
	}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer rcancel()
	return waitFor(rctx, n.kubelet, "node "+n.Name+" Ready", func(ctx context.Context) error {
		var node corev1.Node
		if err := b.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("condition Ready is %s: %s", c.Status, c.Message)
			}
		}
		return errors.New("no Ready condition yet")
	})
}

// registryHosts lists the host:port of the bed's registries.
func (b *Bed) registryHosts() []string {
	var hosts []string
	for _, r := range []*Registry{b.Registry, b.AuthRegistry} {
		if r != nil {
			hosts = append(hosts, r.Host)
		}
	}
	return hosts
}

// writeRegistryHosts tells containerd that each registry speaks plain HTTP
// (a hosts.toml per registry, containerd's registry configuration).
func (n *RealNode) writeRegistryHosts(hosts []string) error {
	for _, h := range hosts {
		dir := filepath.Join(n.Dir, "certs.d", h)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n",
			"http://"+h, "http://"+h)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(toml), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig is containerd 2's configuration (version 3): every path
// under the node's directory (two beds' nodes share nothing), runc from the
// bed's tools (and runtime handler runc-nouserns, see
// NoUserNamespaceRuntimeClass), CNI from the bed's plugins, network namespaces under the
// state directory rather than /var/run/netns, and the bed's pause image.
func (n *RealNode) containerdConfig(assets, sandboxImage, nousernsRunc string) string {
	d := func(rel string) string { return strconv.Quote(filepath.Join(n.Dir, rel)) }
	return fmt.Sprintf(`version = 3
root = %s
state = %s

[grpc]
  address = %s

[ttrpc]
  address = %s

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %s
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %q
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = %s
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    # This machine gives root no CAP_SYS_RESOURCE: never lower a score.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %q
          SystemdCgroup = false
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc-nouserns]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc-nouserns.options]
          BinaryName = %q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%q]
      conf_dir = %s
`, d("containerd/root"), d("containerd/state"), d("containerd.sock"), d("containerd.sock.ttrpc"),
		d("containerd/opt"), sandboxImage, d("certs.d"), filepath.Join(assets, "runc"), nousernsRunc,
		filepath.Join(assets, "cni"), d("net.d"))
}

// writeCNIConfig gives pods addresses of the node's subnet on its bridge, the
// node's address as their gateway, no masquerading (they talk only to this
// machine) and host ports through portmap.
func (n *RealNode) writeCNIConfig() error {
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "archway-bed",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.bridge, filepath.Join(n.Dir, "cni"), n.PodCIDR, n.IP)
	return os.WriteFile(filepath.Join(n.Dir, "net.d", "10-archway-bed.conflist"), []byte(conf), 0o644)
}

// kubeletConfig is the kubelet's configuration: containerd's socket, cgroupfs
// (no systemd here) on this machine's cgroup v1 hierarchy under a root of
// its own (makeCgroupRoot), serving on the
// node's address only, anonymous reads allowed (the apiserver reads logs
// without a client certificate; nothing outside this machine reaches the
// address), and eviction thresholds a shared test machine will not trip.
func (n *RealNode) kubeletConfig(healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
cgroupRoot: /%s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
podLogsDir: %s
resolvConf: /etc/resolv.conf
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
featureGates:
  UserNamespacesSupport: true
`, n.ContainerdSocket, n.IP, healthzPort, n.bridge, filepath.Join(n.Dir, "logs"))
}

// stopRealNode removes what the node's processes leave on the machine once
// they are stopped: container processes (shims outlive containerd), mounts
// under its directory, kube-proxy's iptables rules and the bridge.
func (n *RealNode) stop() {
	if n == nil {
		return
	}
	if n.Dir != "" {
		killShims(n.ContainerdSocket)
		unmountUnder(n.Dir)
	}
	if n.proxy != nil {
		if bin, err := Tool("kube-proxy"); err == nil {
			_ = exec.Command(bin, "--cleanup", "--proxy-mode=iptables").Run()
		}
	}
	removeKubeletChains()
	n.removeCgroupRoot()
	n.deleteBridge()
}

// cgroupHierarchies are the mounted cgroup hierarchies (v1 controllers, the
// named systemd one and the unified one of a hybrid setup).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out, nil
}

// makeCgroupRoot makes /<bridge> in every cgroup hierarchy: the kubelet's
// cgroup root, so that two beds' kubelets each manage pods of their own
// (a kubelet removes the pod cgroups under its root it does not know).
func (n *RealNode) makeCgroupRoot() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, n.bridge)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		// A cpuset cgroup runs nothing until it has CPUs and memory nodes.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the kubelet's cgroup root, children first, once
// its processes are gone.
func (n *RealNode) removeCgroupRoot() {
	hs, err := cgroupHierarchies()
	if err != nil {
		return
	}
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, n.bridge), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

// removeKubeletChains removes the iptables chains a kubelet adds on start
// (KUBE-FIREWALL, which drops packets to 127.0.0.0/8 from other addresses,
// and the KUBE-KUBELET-CANARY chains), which it never removes.
func removeKubeletChains() {
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, hook := range []string{"INPUT", "OUTPUT"} {
			for exec.Command(ipt, "-t", "filter", "-D", hook, "-j", "KUBE-FIREWALL").Run() == nil {
			}
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			for _, chain := range []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY"} {
				if exec.Command(ipt, "-t", table, "-F", chain).Run() == nil {
					_ = exec.Command(ipt, "-t", table, "-X", chain).Run()
				}
			}
		}
	}
}

// killShims kills every containerd shim started for the containerd at socket,
// with the containers it runs (each shim leads its containers' group).
func killShims(socket string) {
	if socket == "" {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == socket {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				// The shim's children: the containers' init processes.
				killChildren(pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func killChildren(parent int) {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == parent {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder lazily unmounts every mount point below dir, deepest first.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	prefix := filepath.Clean(dir) + "/"
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && strings.HasPrefix(fields[4], prefix) {
			points = append(points, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// PauseImageRepository is the repository of the real node's sandbox image.
const PauseImageRepository = "archway/pause"

// pushPauseImage builds the pause program (cmd/pause) for this machine,
// pushes it as a one-file image whose entrypoint it is, and returns its
// reference in the bed's registry.
func (b *Bed) pushPauseImage(ctx context.Context) (string, error) {
	return b.PushProgramImage(ctx, "./test/bed/cmd/pause", PauseImageRepository+":bed", runtime.GOARCH, runtime.GOARCH)
}

// writeOneFileImage writes an OCI layout, tag "bed", of one linux/arch image
// holding the executable /name as its entrypoint.
func writeOneFileImage(dir, name string, content []byte, arch string) error {
	return writeImageLayout(dir, arch, nil, map[string][]byte{name: content}, []string{"/" + name})
}

// writeImageLayout writes an OCI layout, tag "bed", of one linux/arch image:
// the layers of base (gzipped tars, with their diff IDs; none for an image
// of only files), then one layer of executable files (path without the
// leading slash -> content), with the given entrypoint.
func writeImageLayout(dir, arch string, base []imageLayer, files map[string][]byte, entrypoint []string) error {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, name := range names {
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)
	for _, d := range dirNames {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: baseImageEpoch}); err != nil {
			return err
		}
	}
	for _, name := range names {
		content := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(content)), ModTime: baseImageEpoch}); err != nil {
			return err
		}
		if _, err := tw.Write(content); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	w := layoutWriter{dir: dir}
	var layers []ocispec.Descriptor
	var diffIDs []digest.Digest
	for _, l := range base {
		desc, err := w.blob(ocispec.MediaTypeImageLayerGzip, l.gzipped)
		if err != nil {
			return err
		}
		layers = append(layers, desc)
		diffIDs = append(diffIDs, l.diffID)
	}
	top, err := w.blob(ocispec.MediaTypeImageLayer, tarBuf.Bytes())
	if err != nil {
		return err
	}
	layers = append(layers, top)
	diffIDs = append(diffIDs, top.Digest)
	platform := ocispec.Platform{OS: "linux", Architecture: arch}
	config, err := w.blob(ocispec.MediaTypeImageConfig, ocispec.Image{
		Created:  &baseImageEpoch,
		Platform: platform,
		Config: ocispec.ImageConfig{
			Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Entrypoint: entrypoint,
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	})
	if err != nil {
		return err
	}
	manifest, err := w.blob(ocispec.MediaTypeImageManifest, ocispec.Manifest{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config,
		Layers:    layers,
	})
	if err != nil {
		return err
	}
	manifest.Platform = &platform
	manifest.Annotations = map[string]string{ocispec.AnnotationRefName: "bed"}
	if err := w.json(ocispec.ImageLayoutFile, ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion}); err != nil {
		return err
	}
	return w.json(ocispec.ImageIndexFile, ocispec.Index{
		Versioned: imgspec.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{manifest},
	})
}

// imageLayer is a gzipped layer and the digest of its uncompressed tar.
type imageLayer struct {
	gzipped []byte
	diffID  digest.Digest
}

// busyboxLayerFor is the base image's layer for a Debian architecture.
func busyboxLayerFor(debArch string) (imageLayer, error) {
	debs, err := busyboxDebs(filepath.Join(CacheDir(), "debs"))
	if err != nil {
		return imageLayer{}, err
	}
	for i, p := range basePlatforms {
		if p.debArch != debArch {
			continue
		}
		busybox, err := debFile(debs[i], "bin/busybox")
		if err != nil {
			return imageLayer{}, err
		}
		gz, diffID, err := busyboxLayer(busybox)
		return imageLayer{gzipped: gz, diffID: diffID}, err
	}
	return imageLayer{}, fmt.Errorf("the base image has no busybox for Debian architecture %s", debArch)
}

// PushBuilderImage builds the builder (./cmd/builder) for this machine as
// make images does (cgo, static, netgo, osusergo, Debian's static SQLite), puts it at
// /usr/local/bin/builder on the bed's busybox, pushes that image to the
// bed's registry as ref (e.g. "archway/builder:node") and returns the full
// reference and the binary's path.
func (b *Bed) PushBuilderImage(ctx context.Context, ref string) (image, binary string, err error) {
	dir, err := os.MkdirTemp(b.Dir, "builder-")
	if err != nil {
		return "", "", err
	}
	binary = filepath.Join(dir, "builder")
	// The flags of hack/images.sh for this machine, so that the packages
	// compiled for make images (and its test) are reused.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-tags", BuildTags,
		"-ldflags", "-s -w -linkmode external -extldflags '-static -lm'", "-o", binary, "./cmd/builder")
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local", "CGO_ENABLED=1", "CC=gcc")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/builder (static): %w\n%s", err, msg)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return "", "", err
	}
	debArch := runtime.GOARCH
	if debArch == "ppc64le" {
		debArch = "ppc64el"
	}
	base, err := busyboxLayerFor(debArch)
	if err != nil {
		return "", "", err
	}
	layoutDir := binary + ".layout"
	if err := writeImageLayout(layoutDir, runtime.GOARCH, []imageLayer{base},
		map[string][]byte{"usr/local/bin/builder": data}, []string{"/usr/local/bin/builder"}); err != nil {
		return "", "", err
	}
	image, err = b.pushLayout(ctx, layoutDir, ref)
	return image, binary, err
}

// pushLayout pushes the image tagged "bed" in the OCI layout at dir to the
// bed's registry as ref and returns the full reference.
func (b *Bed) pushLayout(ctx context.Context, dir, ref string) (string, error) {
	src, err := layout.NewReference(dir, "bed")
	if err != nil {
		return "", err
	}
	full := b.Registry.Host + "/" + ref
	dest, err := docker.ParseReference("//" + full)
	if err != nil {
		return "", err
	}
	if _, err := copyImage(ctx, dest, src, b.Registry.SystemContext(), &types.SystemContext{}); err != nil {
		return "", fmt.Errorf("pushing %s: %w", full, err)
	}
	return full, nil
}

// PushProgramImage builds the repository's Go package pkg for linux/goarch
// (static, no cgo), wraps the program in a one-file image for linux/arch
// whose entrypoint it is, pushes it to the bed's registry as ref (a
// repository and tag, e.g. "tests/whoami:v1") and returns the full
// reference. goarch and arch differ only for tests of a mislabelled image.
func (b *Bed) PushProgramImage(ctx context.Context, pkg, ref, goarch, arch string) (string, error) {
	dir, err := os.MkdirTemp(b.Dir, "program-")
	if err != nil {
		return "", err
	}
	name := filepath.Base(pkg)
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s for %s: %w\n%s", pkg, goarch, err, msg)
	}
	return b.pushOneFileImage(ctx, out, ref, arch)
}

// pushOneFileImage pushes the executable at path as a one-file image for
// linux/arch to the bed's registry as ref and returns the full reference.
func (b *Bed) pushOneFileImage(ctx context.Context, path, ref, arch string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	layoutDir := path + ".layout"
	if err := writeOneFileImage(layoutDir, filepath.Base(path), data, arch); err != nil {
		return "", err
	}
	return b.pushLayout(ctx, layoutDir, ref)
}
