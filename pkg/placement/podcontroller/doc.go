// Package podcontroller is placement's pod placement controller, run by
// the elected leader: for each gated pod it inspects the images (with the
// pull secrets a kubelet would use, credentials.go, and the outputs of
// completed Builds, built_images.go), decides the pod's node affinity
// (decide.go, affinity.go, preferences.go), and removes the gate in one
// update, retrying failed inspections with backoff (backoff.go). The gate
// sweeper (sweep.go) labels the pods carrying the gate without the gated
// label. Setup
// registers them with a manager and returns what the config controller
// needs (Shared).
package podcontroller
