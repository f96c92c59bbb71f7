// Package placement places pods on nodes whose architecture all their
// images support, without anyone writing affinity by hand.
//
// Three parts, deployable apart from one binary:
//   - the gate webhook (webhook.go) adds the scheduling gate
//     multiarch.openshift.io/scheduling-gate to new pods while a
//     ClusterPodPlacementConfig exists and a placement controller's
//     heartbeat lease (heartbeat.go) is fresh; it reads only informer
//     caches;
//   - the pod placement controller (pod_controller.go) inspects each gated
//     pod's images, restricts its required node affinity to the
//     architectures they share (affinity.go, a pure merge that respects
//     KEP-3838's rules), adds preferred weights, labels the pod and removes
//     the gate in one update; it handles every unbound pod carrying the
//     gate, whoever added it, and releases them all when told to stop;
//   - the config controller (config_controller.go) keeps the webhook
//     configuration's namespaceSelector in sync with the config and, when
//     the config is deleted, releases every gated pod before it goes.
//
// Decisions are pure functions with table tests: which pods to gate
// (admission.go), what to do with a gated pod given its inspection results
// (decide.go), and the affinity merge. Labels, event reasons and other
// names users see are in names.go.
package placement
