// Package placement places pods on nodes whose architecture all their
// images support, without anyone writing affinity by hand.
//
// Three parts, deployable apart from one binary, each a package with one
// Setup:
//   - the gate webhook (webhook) adds the scheduling gate
//     multiarch.openshift.io/scheduling-gate to new pods while a
//     ClusterPodPlacementConfig exists and a placement controller's
//     heartbeat lease (lease.go) is fresh; it reads only informer caches;
//   - the pod placement controller (podcontroller) inspects each gated
//     pod's images, restricts its required node affinity to the
//     architectures they share (a pure merge that respects KEP-3838's
//     rules), adds preferred weights, labels the pod and removes the gate in
//     one update; it handles every unbound pod carrying the gate, whoever
//     added it;
//   - the config controller (config) keeps the webhook configuration's
//     namespaceSelector in sync with the config and, when the config is
//     deleted or the controller is told to stop, releases every gated pod
//     before it goes (or hands them over to the next leader).
//
// This package holds what the parts share: the labels, event reasons and
// other names users see (names.go), Options, the scheduling gate helpers
// (gates.go), the heartbeat lease check, the PodPlacementConfig priority
// claims, the caches' selectors and leader-election wrappers (setup.go), and
// the check that a ClusterPodPlacementConfig CRD is archway's to use and not
// OLM's (crd_ownership.go), which the placement operator (operator) and the
// conversion webhook's CA writer (conversion) share.
// Decisions are pure functions with table tests: which pods to gate
// (webhook/admission.go), what to do with a gated pod given its inspection
// results (podcontroller/decide.go), and the affinity merge
// (podcontroller/affinity.go).
package placement
