package v1beta1

// LogVerbosityLevel is how much the placement components log.
// +kubebuilder:validation:Enum=Normal;Debug;Trace;TraceAll
type LogVerbosityLevel string

// The log verbosity levels, from the least to the most verbose.
const (
	LogVerbosityNormal   LogVerbosityLevel = "Normal"
	LogVerbosityDebug    LogVerbosityLevel = "Debug"
	LogVerbosityTrace    LogVerbosityLevel = "Trace"
	LogVerbosityTraceAll LogVerbosityLevel = "TraceAll"
)

// The architectures a placement config may name: those of Kubernetes'
// kubernetes.io/arch node label on the platforms archway supports.
const (
	ArchitectureAMD64   = "amd64"
	ArchitectureARM64   = "arm64"
	ArchitecturePPC64LE = "ppc64le"
	ArchitectureS390X   = "s390x"
)

// KnownArchitectures lists the architectures in the enums below, sorted.
func KnownArchitectures() []string {
	return []string{ArchitectureAMD64, ArchitectureARM64, ArchitecturePPC64LE, ArchitectureS390X}
}

// Plugins are the optional behaviours of arch-aware placement.
type Plugins struct {
	// nodeAffinityScoring adds preferred node affinity terms, weighted per
	// architecture, to the pods the placement controller handles. Default:
	// unset (no preferences).
	// +optional
	NodeAffinityScoring *NodeAffinityScoring `json:"nodeAffinityScoring,omitempty"`

	// execFormatErrorMonitor reports containers that could not start
	// because their entrypoint is for another architecture than their
	// node's (exec format error): a Warning event ExecFormatError on the
	// pod and archway_placement_exec_format_errors_total. It reads pods'
	// status and, for runc's exit code 255, the last lines of the
	// container's log; it does not see exec format errors a running
	// container survives. ClusterPodPlacementConfig only. Default: unset
	// (off).
	// +optional
	ExecFormatErrorMonitor *ExecFormatErrorMonitor `json:"execFormatErrorMonitor,omitempty"`
}

// ExecFormatErrorMonitor turns the exec-format-error monitor on or off.
type ExecFormatErrorMonitor struct {
	// enabled turns the monitor on. Required.
	// +required
	Enabled bool `json:"enabled"`
}

// NodeAffinityScoring weighs the architectures a pod can run on, so the
// scheduler prefers some of them among the nodes that fit.
type NodeAffinityScoring struct {
	// enabled turns the plugin on. Required.
	// +required
	Enabled bool `json:"enabled"`

	// platforms are the weights, one entry per architecture. Required: at
	// least one and at most 16 entries, each architecture at most once (a
	// second entry is rejected as a duplicate key of the list).
	// Every entry becomes a preferred term, as in the multiarch tuning
	// operator: one for an architecture the pod's images lack changes
	// nothing, the required term already rules it out.
	// +required
	// +listType=map
	// +listMapKey=architecture
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Platforms []NodeAffinityScoringPlatformTerm `json:"platforms"`
}

// NodeAffinityScoringPlatformTerm is the weight of one architecture.
type NodeAffinityScoringPlatformTerm struct {
	// architecture is a kubernetes.io/arch value: amd64, arm64, ppc64le or
	// s390x. Required.
	// +required
	// +kubebuilder:validation:Enum=arm64;amd64;ppc64le;s390x
	Architecture string `json:"architecture"`

	// weight is the weight of the preferred node affinity term for the
	// architecture, from 1 to 100. Required.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
}
