package protection

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// Operation is the kind of request being decided.
type Operation string

const (
	// OpCreate is a pod being created.
	OpCreate Operation = "create"
	// OpUpdate is a pod being updated.
	OpUpdate Operation = "update"
	// OpBind is a binding (pods/binding) being posted.
	OpBind Operation = "bind"
)

// Request is what the decision looks at.
type Request struct {
	Operation Operation
	// User is the requester's user name as the apiserver authenticated it.
	User string
	// Groups are the requester's groups as the apiserver authenticated
	// them.
	Groups []string
	// Namespace and Name are the pod's.
	Namespace, Name string
	// Pod is the pod as it would be stored (create, update); nil for a
	// binding.
	Pod *corev1.Pod
	// OldPod is the pod before an update.
	OldPod *corev1.Pod
	// BindingNode is the node a binding assigns the pod to.
	BindingNode string
}

// Result is a group's verdict on a request.
type Result string

const (
	// ResultDisabled: the group's mode is Disable; nothing was evaluated.
	ResultDisabled Result = "disabled"
	// ResultNoPath: the request puts the pod on none of the group's nodes.
	ResultNoPath Result = "no-path"
	// ResultAuthorized: it does, and the requester and the pod's
	// namespace are both authorized.
	ResultAuthorized Result = "authorized"
	// ResultDenied: it does without authorization, in mode Enable.
	ResultDenied Result = "denied"
	// ResultWarned: it does without authorization, in mode Inform.
	ResultWarned Result = "warned"
)

// Decision is one group's verdict.
type Decision struct {
	Group  schedulingv1alpha1.ProtectionGroupName
	Mode   schedulingv1alpha1.GroupMode
	Result Result
	// Paths are how the request reaches the group's nodes.
	Paths []Path
	// ActorAuthorized and NamespaceAuthorized say which half of the
	// authorization held.
	ActorAuthorized, NamespaceAuthorized bool
	// Message says who, what and why, and how to get authorized; set for
	// denied and warned requests.
	Message string
}

// Decide returns a decision per group of cfg (none when cfg is nil): which
// of the nodes are the group's, the paths by which req puts its pod on
// them, and whether both the requester and the pod's namespace are on the
// group's authorizedUsers. A group whose selector is invalid protects every
// node, so a broken config never opens the nodes up.
func Decide(cfg *schedulingv1alpha1.ControlPlaneProtection, nodes []Node, req Request) []Decision {
	if cfg == nil {
		return nil
	}
	var out []Decision
	for _, g := range cfg.Spec.Groups {
		d := Decision{Group: g.Name, Mode: g.Mode}
		if d.Mode == "" {
			d.Mode = schedulingv1alpha1.ModeDisable
		}
		if d.Mode == schedulingv1alpha1.ModeDisable {
			d.Result = ResultDisabled
			out = append(out, d)
			continue
		}
		protected := groupNodes(g.LabelSelector, nodes)
		d.Paths = requestPaths(req, protected, nodes)
		switch {
		case len(d.Paths) == 0:
			d.Result = ResultNoPath
		default:
			// A member of an authorized group administers the cluster:
			// its requests are authorized in any namespace.
			admin := groupAuthorized(req.Groups, g.AuthorizedGroups)
			d.ActorAuthorized = admin || actorAuthorized(req.User, g.AuthorizedUsers)
			d.NamespaceAuthorized = admin || namespaceAuthorized(req.Namespace, g.AuthorizedUsers)
			switch {
			case d.ActorAuthorized && d.NamespaceAuthorized:
				d.Result = ResultAuthorized
			case d.Mode == schedulingv1alpha1.ModeEnable:
				d.Result = ResultDenied
			default:
				d.Result = ResultWarned
			}
		}
		if d.Result == ResultDenied || d.Result == ResultWarned {
			d.Message = message(req, d)
		}
		out = append(out, d)
	}
	return out
}

// DefaultLabelSelector is the ControlPlane group's selector when the config
// leaves it out (the CRD's default, for configs built in Go).
func DefaultLabelSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}
}

// groupNodes is the set of names of the nodes the selector selects.
func groupNodes(sel *metav1.LabelSelector, nodes []Node) map[string]bool {
	if sel == nil {
		sel = DefaultLabelSelector()
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || selector.Empty() {
		selector = labels.Everything()
	}
	protected := map[string]bool{}
	for _, n := range nodes {
		if selector.Matches(labels.Set(n.Labels)) {
			protected[n.Name] = true
		}
	}
	return protected
}

func requestPaths(req Request, protected map[string]bool, nodes []Node) []Path {
	switch req.Operation {
	case OpBind:
		if protected[req.BindingNode] {
			return []Path{{Kind: PathBinding, What: fmt.Sprintf("binding to node %q", req.BindingNode), Nodes: []string{req.BindingNode}}}
		}
		return nil
	case OpUpdate:
		if req.Pod == nil {
			return nil
		}
		after := podPaths(req.Pod, protected, nodes)
		if req.OldPod == nil {
			return after
		}
		return newPaths(podPaths(req.OldPod, protected, nodes), after)
	default:
		if req.Pod == nil {
			return nil
		}
		return podPaths(req.Pod, protected, nodes)
	}
}

// message says who did what, which group it reaches and how to get
// authorized.
func message(req Request, d Decision) string {
	var what []string
	for _, p := range d.Paths {
		what = append(what, p.String())
	}
	verb := map[Operation]string{OpCreate: "creating", OpUpdate: "updating", OpBind: "binding"}[req.Operation]
	var b strings.Builder
	fmt.Fprintf(&b, "%s pod %s/%s puts it on protected node group %s (mode %s) through %s; ",
		verb, req.Namespace, req.Name, d.Group, d.Mode, strings.Join(what, "; "))
	var missing, add []string
	if !d.ActorAuthorized {
		missing = append(missing, fmt.Sprintf("the requesting user %q", req.User))
		if ns, name, err := serviceaccount.SplitUsername(req.User); err == nil {
			add = append(add, fmt.Sprintf("%q", ns+"/"+name))
		} else {
			add = append(add, fmt.Sprintf("%q", req.User))
		}
	}
	if !d.NamespaceAuthorized {
		missing = append(missing, fmt.Sprintf("the pod's namespace %q", req.Namespace))
		add = append(add, fmt.Sprintf("%q", req.Namespace+"/"+podServiceAccount(req.Pod)))
	}
	fmt.Fprintf(&b, "not authorized: %s. To be authorized, a cluster administrator adds %s to spec.groups[name=%s].authorizedUsers of ControlPlaneProtection %q, "+
		"or grants the requester the verb %s on %s/%s (group %s) with a RoleBinding in namespace %q",
		strings.Join(missing, " and "), strings.Join(add, " and "), d.Group, schedulingv1alpha1.ControlPlaneProtectionName,
		UseVerb, ProtectionsResource, GroupSubresource(d.Group), schedulingv1alpha1.GroupVersion.Group, req.Namespace)
	if req.Operation != OpBind {
		fmt.Fprintf(&b, "; otherwise remove the %s from the pod", strings.Join(pathFields(d.Paths), " and "))
	}
	return b.String()
}

func podServiceAccount(pod *corev1.Pod) string {
	if pod != nil && pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

func pathFields(paths []Path) []string {
	var out []string
	for _, p := range paths {
		f := map[PathKind]string{
			PathNodeName: "spec.nodeName", PathToleration: "toleration",
			PathNodeSelection: "node selection", PathBinding: "binding",
		}[p.Kind]
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}
