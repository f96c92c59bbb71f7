// Package config is placement's config controller, run by the elected
// leader: it keeps the gate webhook's namespaceSelector in step with the
// ClusterPodPlacementConfig (webhook_configuration.go), releases every
// gated pod when the config is deleted (config_controller.go), writes the
// PodPlacementConfigs' status and priority claims (config_status.go), and
// renews the heartbeat lease the webhook reads (heartbeat.go), handing the
// gated pods over to the next leader when it stops (handover.go). Setup
// registers them with a manager, given what podcontroller.Setup returned.
package config
