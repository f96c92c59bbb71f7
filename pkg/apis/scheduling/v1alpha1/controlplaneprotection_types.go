package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControlPlaneProtectionName is the only name a ControlPlaneProtection may
// have: it is a singleton.
const ControlPlaneProtectionName = "cluster"

// ControlPlaneProtection says which nodes are protected and who may put
// pods on them. A pod reaches a protected node when its spec.nodeName names
// one, when it tolerates the control-plane taints and its node selection
// does not rule every protected node out, when its node selection matches
// protected nodes only, or when a binding (the scheduler's, or anyone's)
// assigns it to one. Such a request is authorized only when both the
// requesting user (the pod's creator, or the binding's poster) and the
// pod's namespace are on the group's authorizedUsers.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=controlplaneprotections,singular=controlplaneprotection,scope=Cluster,shortName=cpp
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.groups[?(@.name=="ControlPlane")].mode`,description="The ControlPlane group's mode in effect (the override's while it lasts)."
// +kubebuilder:printcolumn:name="Enforcing",type=string,JSONPath=`.status.conditions[?(@.type=="Enforcing")].status`,description="Whether some group denies unauthorized requests now."
// +kubebuilder:printcolumn:name="Override Until",type=string,JSONPath=`.spec.override.until`,description="When the emergency override lapses."
// +kubebuilder:printcolumn:name="Denied",type=integer,JSONPath=`.status.denials.count`,description="Requests denied since the webhook's replicas started counting."
// +kubebuilder:printcolumn:name="Last Denial",type=date,JSONPath=`.status.denials.last.time`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'cluster'",message="ControlPlaneProtection is a singleton: metadata.name must be 'cluster'"
type ControlPlaneProtection struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the protected node groups. Required.
	// +required
	Spec ControlPlaneProtectionSpec `json:"spec"`

	// status is what the webhook enforces now and what it denied
	// recently, written by its replicas.
	// +optional
	Status ControlPlaneProtectionStatus `json:"status,omitempty"`
}

// ControlPlaneProtectionSpec lists the protected node groups.
type ControlPlaneProtectionSpec struct {
	// groups are the protected node groups, at most one per name.
	// Default: none (nothing is protected).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1
	Groups []ProtectionGroup `json:"groups,omitempty"`

	// override relaxes every group for a while, as an emergency switch
	// that lapses by itself at override.until (the webhook reads the
	// clock; nothing needs to run for it to lapse). Default: none.
	// +optional
	Override *ProtectionOverride `json:"override,omitempty"`
}

// MaxOverride is how far ahead of the time it is written an override's
// until may be.
const MaxOverride = 24 * time.Hour

// ProtectionOverride is an emergency override of every group's mode.
//
// +kubebuilder:validation:XValidation:rule="self.mode != 'Enable'",message="override.mode must be Disable or Inform: an override only relaxes; set a group's mode to Enable instead"
type ProtectionOverride struct {
	// mode is what every group in a stricter mode follows until the
	// override lapses: Disable or Inform. Required.
	// +required
	Mode GroupMode `json:"mode"`

	// until is when the override lapses (RFC 3339, e.g.
	// 2026-01-02T15:04:05Z). Required. When written it must be in the
	// future and at most 24 hours ahead; renew it to keep it.
	// +required
	Until metav1.Time `json:"until"`

	// reason says why, for whoever reads the ControlPlaneProtection.
	// Optional, at most 256 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
}

// ControlPlaneProtectionStatus is what the webhook enforces now and what it
// denied recently.
type ControlPlaneProtectionStatus struct {
	// observedGeneration is the generation of the spec this status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready (every group protects some node and its
	// selector is valid), Enforcing (some group denies unauthorized
	// requests now) and Overridden (an override is in effect).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// groups are what each group enforces now.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1
	Groups []GroupStatus `json:"groups,omitempty"`

	// denials are the requests denied, counted by every replica of the
	// webhook since it started, and the last one.
	// +optional
	Denials *DenialStatus `json:"denials,omitempty"`
}

// Condition types of a ControlPlaneProtection.
const (
	// ConditionReady is true when every group's label selector is valid
	// and selects some node.
	ConditionReady = "Ready"
	// ConditionEnforcing is true when some group is in mode Enable now,
	// override considered.
	ConditionEnforcing = "Enforcing"
	// ConditionOverridden is true while spec.override is in effect.
	ConditionOverridden = "Overridden"
)

// GroupStatus is what one group enforces now.
type GroupStatus struct {
	// name is the group's name.
	// +required
	Name ProtectionGroupName `json:"name"`

	// mode is the mode in effect: the group's, or the override's while it
	// is in effect and less strict.
	// +required
	Mode GroupMode `json:"mode"`

	// protectedNodes is how many nodes the group's selector selects.
	// +optional
	ProtectedNodes int32 `json:"protectedNodes"`

	// authorizedUsers in effect (the group's).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	AuthorizedUsers []string `json:"authorizedUsers,omitempty"`

	// authorizedGroups in effect (the group's).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	AuthorizedGroups []string `json:"authorizedGroups,omitempty"`
}

// DenialStatus counts denied requests and keeps the last one.
type DenialStatus struct {
	// count is how many requests were denied.
	// +optional
	Count int64 `json:"count"`

	// last is the most recent denied request.
	// +optional
	Last *Denial `json:"last,omitempty"`
}

// Denial is one denied request.
type Denial struct {
	// time is when it was denied.
	// +required
	Time metav1.Time `json:"time"`

	// group is the group that denied it.
	// +required
	Group ProtectionGroupName `json:"group"`

	// operation is create, update or bind.
	// +required
	// +kubebuilder:validation:MaxLength=16
	Operation string `json:"operation"`

	// user is the requester (cut to 253 characters).
	// +required
	// +kubebuilder:validation:MaxLength=253
	User string `json:"user"`

	// namespace is the pod's.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// pod is the pod's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`
}

// ProtectionGroupName names a protected node group.
// +kubebuilder:validation:Enum=ControlPlane
type ProtectionGroupName string

// ControlPlane is the group of control-plane nodes.
const ControlPlane ProtectionGroupName = "ControlPlane"

// GroupMode is how a group's policy is enforced.
// +kubebuilder:validation:Enum=Disable;Enable;Inform
type GroupMode string

const (
	// ModeDisable enforces nothing and reports nothing.
	ModeDisable GroupMode = "Disable"
	// ModeEnable denies requests that put a pod on a protected node
	// without authorization.
	ModeEnable GroupMode = "Enable"
	// ModeInform admits such requests, with an admission warning, an
	// event on the pod and an audit annotation.
	ModeInform GroupMode = "Inform"
)

// ProtectionGroup is one group of protected nodes and who may use them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.labelSelector) || (has(self.labelSelector.matchLabels) && size(self.labelSelector.matchLabels) > 0) || (has(self.labelSelector.matchExpressions) && size(self.labelSelector.matchExpressions) > 0)",message="labelSelector must not be empty: an empty selector would protect every node; omit it for the default node-role.kubernetes.io/control-plane"
type ProtectionGroup struct {
	// name is the group's name: ControlPlane. Required.
	// +required
	Name ProtectionGroupName `json:"name"`

	// labelSelector selects the group's nodes by their labels. Default:
	// matchLabels node-role.kubernetes.io/control-plane: "". Must not be
	// empty.
	// +optional
	// +kubebuilder:default={matchLabels: {"node-role.kubernetes.io/control-plane": ""}}
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// mode is Disable, Enable or Inform. Default: Disable.
	// +optional
	// +kubebuilder:default=Disable
	Mode GroupMode `json:"mode,omitempty"`

	// authorizedUsers are who may put pods on the group's nodes. An entry
	// "namespace/serviceaccount" authorizes that service account as a
	// requester, and pods in that namespace (authorization of pods is by
	// namespace: list one service account, e.g. default, to admit the
	// namespace's pods). Any other entry is a user name, authorized as a
	// requester; a user name may end in "*" to match every name with that
	// prefix (e.g. "system:node:*" for kubelets creating mirror pods).
	// Default: none. At most 256 entries, each unique, non-empty and at
	// most 253 characters.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(u, !u.contains('/') || u.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'))",message="an authorizedUsers entry with a '/' must be namespace/serviceaccount: a DNS label, one '/', a DNS subdomain (e.g. kube-system/default)"
	// +kubebuilder:validation:XValidation:rule="self.all(u, !u.contains('*') || (u.indexOf('*') == size(u) - 1 && size(u) > 1 && !u.contains('/')))",message="a '*' in authorizedUsers may only end a user name prefix (e.g. system:node:*); a lone '*' would authorize everybody: use mode Disable instead"
	AuthorizedUsers []string `json:"authorizedUsers,omitempty"`

	// authorizedGroups are groups whose members administer the cluster
	// (e.g. system:masters, or the group bound to the cluster-admin
	// ClusterRole): a requester in one of them is authorized, and so are
	// its requests whatever the pod's namespace (it could add any namespace
	// to authorizedUsers anyway), which is what `kubectl debug node/...`
	// needs. A pod it creates for a scheduler to bind still needs its
	// namespace authorized for the scheduler's binding. Default:
	// none. At most 32 entries, each unique, non-empty and at most 253
	// characters, without "*" (list each group).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(g, !g.contains('*'))",message="authorizedGroups entries are group names, matched exactly: a '*' would authorize unknown groups"
	AuthorizedGroups []string `json:"authorizedGroups,omitempty"`
}

// ControlPlaneProtectionList is a list of ControlPlaneProtections.
//
// +kubebuilder:object:root=true
type ControlPlaneProtectionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the configs.
	Items []ControlPlaneProtection `json:"items"`
}
