package main

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions is how the manager serves /metrics. By default over HTTPS
// (with the certificate in --metrics-cert-dir, or a self-signed one made at
// start) and only to callers the apiserver authenticates (TokenReview) and
// authorizes for `get` on the non-resource URL /metrics
// (SubjectAccessReview): the ClusterRole archway-metrics-reader grants
// that. --metrics-secure=false serves plain HTTP to anyone, for local runs.
func metricsOptions(opts *options) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.metricsAddr}
	if !opts.metricsSecure {
		return o
	}
	o.SecureServing = true
	o.CertDir = opts.metricsCertDir
	o.FilterProvider = filters.WithAuthenticationAndAuthorization
	return o
}

// logMetricsServing says how metrics are served, so an insecure endpoint
// is never a surprise.
func logMetricsServing(opts *options) {
	log := ctrl.Log.WithName("setup")
	switch {
	case opts.metricsAddr == "0":
		log.Info("metrics endpoint disabled")
	case opts.metricsSecure:
		log.Info("serving metrics over HTTPS to authorized callers", "address", opts.metricsAddr)
	default:
		log.Info("serving metrics over plain HTTP to anyone (--metrics-secure=false): use only for local runs", "address", opts.metricsAddr)
	}
}

// checkMetricsConfig refuses a certificate directory without HTTPS: the
// operator meant the endpoint to be secure.
func checkMetricsConfig(opts *options) error {
	if !opts.metricsSecure && opts.metricsCertDir != "" {
		return fmt.Errorf("--metrics-cert-dir is set but --metrics-secure=false serves plain HTTP: drop one of them")
	}
	return nil
}
