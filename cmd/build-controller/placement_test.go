package main

import (
	"testing"
	"time"

	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

func TestAdjustableLogLevel(t *testing.T) {
	o := &zap.Options{}
	l := adjustableLogLevel(o)
	l.setVerbosity(2)
	if got := o.Level.(uzap.AtomicLevel).Level(); got != zapcore.Level(-2) {
		t.Errorf("after Trace: level %v, want -2", got)
	}
	l.setVerbosity(0)
	if got := l.level.Level(); got != zapcore.InfoLevel {
		t.Errorf("after Normal: level %v, want info", got)
	}
	// --zap-log-level=debug is a floor: Normal does not make it quieter.
	o = &zap.Options{Level: uzap.NewAtomicLevelAt(zapcore.DebugLevel)}
	l = adjustableLogLevel(o)
	l.setVerbosity(0)
	if got := l.level.Level(); got != zapcore.DebugLevel {
		t.Errorf("with --zap-log-level=debug, Normal gave %v", got)
	}
	var none *logLevel
	none.setVerbosity(3) // no logger to adjust: no panic
}

func TestPlacementOptions(t *testing.T) {
	cfg := &configv1alpha1.PlacementConfig{
		GlobalPullSecret: &corev1.SecretReference{Namespace: "ns", Name: "pull"},
		Inspection: configv1alpha1.PlacementInspectionConfig{
			Tries: 3, Backoff: &metav1.Duration{Duration: time.Second}, MaxBackoff: &metav1.Duration{Duration: 10 * time.Second},
		},
		Cache:   configv1alpha1.PlacementCacheConfig{TagTTL: &metav1.Duration{Duration: 30 * time.Second}, Size: 5},
		Workers: 4,
	}
	o := placementOptions(cfg)
	if o.GlobalPullSecret != (types.NamespacedName{Namespace: "ns", Name: "pull"}) || o.InspectionTries != 3 ||
		o.InspectionBackoff != time.Second || o.InspectionMaxBackoff != 10*time.Second || o.TagCacheTTL != 30*time.Second ||
		o.CacheSize != 5 || o.Workers != 4 || o.DigestCacheTTL != 0 {
		t.Errorf("options %+v", o)
	}
}
