package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/archway-build/archway/pkg/placement"
)

// webhookMetrics are the gate webhook's.
type webhookMetrics struct {
	pods    *prometheus.CounterVec
	latency prometheus.Histogram
	// responses counts admission responses by the code they carry.
	responses *prometheus.CounterVec
	// notIntercepted counts pods admitted ungated because of an error.
	notIntercepted *prometheus.CounterVec
}

// Reasons a pod was not intercepted.
const (
	failedBadRequest  = "bad-request"  // the request could not be read (a 4xx answer)
	failedServerError = "server-error" // the answer could not be written (a 5xx)
	failedDecode      = "decode"       // the pod in the request does not decode
	failedPatch       = "patch"        // the gate could not be patched into the pod
	failedConfig      = "config"       // the ClusterPodPlacementConfig could not be read
)

func newWebhookMetrics(reg prometheus.Registerer) (*webhookMetrics, error) {
	m := &webhookMetrics{
		pods: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_webhook_pods_total",
			Help: "Pods the gate webhook admitted, by result (gated, skipped) and the reason for skipping.",
		}, []string{"result", "reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "archway_placement_webhook_duration_seconds",
			Help:    "Time the gate webhook spent deciding on a pod.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1},
		}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_webhook_responses_total",
			Help: "Admission responses of the gate webhook by the code they carry: 200, or a 4xx for a request it could not read and a 5xx for one it failed on (the apiserver then admits the pod ungated).",
		}, []string{"code"}),
		notIntercepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_webhook_intercept_failures_total",
			Help: "Pods admitted ungated because the gate webhook failed on them, by reason (bad-request, server-error, decode, patch, config).",
		}, []string{"reason"}),
	}
	for _, code := range []string{"200", "400", "500"} {
		m.responses.WithLabelValues(code)
	}
	for _, r := range []string{failedBadRequest, failedServerError, failedDecode, failedPatch, failedConfig} {
		m.notIntercepted.WithLabelValues(r)
	}
	return m, placement.Register(reg, m.pods, m.latency, m.responses, m.notIntercepted)
}

// instrument counts the admission responses of next by code. An
// admission answer travels as HTTP 200 whatever it says (controller-runtime
// answers a request it cannot read with a response carrying 400), so the
// code is read from the response's status; a plain HTTP error counts as
// its HTTP status.
func (m *webhookMetrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recordingWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		code := rec.status
		if code == http.StatusOK {
			var review struct {
				Response *struct {
					Status *struct {
						Code int `json:"code"`
					} `json:"status"`
				} `json:"response"`
			}
			if json.Unmarshal(rec.body.Bytes(), &review) == nil && review.Response != nil && review.Response.Status != nil && review.Response.Status.Code != 0 {
				code = review.Response.Status.Code
			}
		}
		m.responses.WithLabelValues(strconv.Itoa(code)).Inc()
		switch {
		case code >= 500:
			m.notIntercepted.WithLabelValues(failedServerError).Inc()
		case code >= 400:
			m.notIntercepted.WithLabelValues(failedBadRequest).Inc()
		}
	})
}

// recordingWriter keeps the status and body written through it.
type recordingWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *recordingWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}
