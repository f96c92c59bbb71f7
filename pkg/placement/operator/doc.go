// Package operator is the placement operator: the small always-on
// component that runs arch-aware placement's operand, the placement
// controller and webhook, only while the ClusterPodPlacementConfig exists,
// as the multiarch tuning operator deploys its operand with the config and
// removes it with it.
//
// While the config exists it binds the operand's ClusterRoles to their
// service accounts (bindings.go) and scales their Deployments to the
// replicas their annotation asks for; when the config is deleted it holds
// the config with a finalizer until the placement controller has released
// every gated pod (the controller's own finalizer), then scales both
// Deployments to zero, waits for their pods to end (a stopping controller
// releases the pods gated in its last moments), deletes the bindings, and
// lets the config go (operator.go). Without a config neither component runs
// and neither holds a cluster-wide right: the controller's service account
// cannot read a Secret. It reports the rollout in the config's status
// (status.go). It holds only bind on those two ClusterRoles, the create
// and delete of their two bindings, and the scale of the two Deployments,
// never what the operand's roles grant.
//
// It leaves a ClusterPodPlacementConfig CRD that OLM installed (the
// multiarch tuning operator's) and its config alone until an administrator
// annotates the CRD for adoption, and says so in an event on the CRD
// (olm.go).
package operator
