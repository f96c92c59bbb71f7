package operator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/archway-build/archway/pkg/placement"
)

// newDesiredReplicas is archway_placement_operand_desired_replicas: the
// replicas the operator runs each operand Deployment with, 0 once it
// stops them on purpose (no config). A Deployment gets its series when
// the leader first decides for it, so a standby replica reports none.
// The alerts for a placement component being down hold while it is 0.
func newDesiredReplicas(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "archway_placement_operand_desired_replicas",
		Help: "Replicas the placement operator runs each operand Deployment (archway-placement-controller, archway-placement-webhook) with: its replicas annotation while the ClusterPodPlacementConfig exists, 0 once the config is deleted and the operand stopped on purpose.",
	}, []string{"deployment"})
	return g, placement.Register(reg, g)
}
