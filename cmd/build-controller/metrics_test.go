package main

import (
	"strings"
	"testing"
)

func TestMetricsAreServedSecurelyByDefault(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		wantSecure bool
	}{
		{args: nil, wantSecure: true},
		{args: []string{"--metrics-secure=false"}, wantSecure: false},
	} {
		cmd := newRootCommand()
		if err := cmd.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		opts := &options{}
		opts.metricsSecure, _ = cmd.Flags().GetBool("metrics-secure")
		opts.metricsAddr, _ = cmd.Flags().GetString("metrics-bind-address")
		o := metricsOptions(opts)
		if o.SecureServing != tt.wantSecure || (o.FilterProvider != nil) != tt.wantSecure {
			t.Errorf("%v: SecureServing %v, authorization filter %v; want both %v", tt.args, o.SecureServing, o.FilterProvider != nil, tt.wantSecure)
		}
	}
}

func TestMetricsCertDirNeedsHTTPS(t *testing.T) {
	err := checkMetricsConfig(&options{metricsCertDir: "/certs"})
	if err == nil || !strings.Contains(err.Error(), "--metrics-secure=false") {
		t.Fatalf("cert dir with plain HTTP: %v", err)
	}
	if err := checkMetricsConfig(&options{metricsSecure: true, metricsCertDir: "/certs"}); err != nil {
		t.Fatal(err)
	}
}
