package instantiate

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// Metrics counts the builds a Starter started.
type Metrics struct {
	started *prometheus.CounterVec
}

// NewMetrics makes the counters; Register adds them to a registry.
func NewMetrics() *Metrics {
	return &Metrics{started: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archway_buildconfig_builds_started_total",
		Help: "Builds started from BuildConfigs, by trigger kind (ConfigChange, GitHub, GitLab, Bitbucket, Generic, Manual).",
	}, []string{"trigger"})}
}

// Register adds the counters to r. When r has them already (another
// component of the process registered them), m counts into those.
func (m *Metrics) Register(r prometheus.Registerer) error {
	err := r.Register(m.started)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(*prometheus.CounterVec); ok {
			m.started = existing
			return nil
		}
	}
	return err
}

func (m *Metrics) observe(req *Request) {
	if m != nil {
		m.started.WithLabelValues(TriggerKind(req.TriggeredBy)).Inc()
	}
}

// TriggerKind names what started a build from its causes: the webhook type,
// ConfigChange, ImageChange, or Manual.
func TriggerKind(causes []buildv1.BuildTriggerCause) string {
	for _, c := range causes {
		switch {
		case c.GitHubWebHook != nil:
			return string(buildv1.GitHubWebHookBuildTriggerType)
		case c.GitLabWebHook != nil:
			return string(buildv1.GitLabWebHookBuildTriggerType)
		case c.BitbucketWebHook != nil:
			return string(buildv1.BitbucketWebHookBuildTriggerType)
		case c.GenericWebHook != nil:
			return string(buildv1.GenericWebHookBuildTriggerType)
		case c.ImageChangeBuild != nil:
			return string(buildv1.ImageChangeBuildTriggerType)
		case c.Message == CauseConfigChange:
			return string(buildv1.ConfigChangeBuildTriggerType)
		}
	}
	return "Manual"
}
