package build

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/archway-build/archway/pkg/eventrecorder"
	"github.com/archway-build/archway/test/bed"
)

// TestEventsWrittenBeforeExit records a burst of events and shuts the
// recorder down at once, as build-controller does on SIGTERM once its
// controllers have stopped: every event recorded must be on the apiserver
// when Shutdown returns.
func TestEventsWrittenBeforeExit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	ns, err := testBed.CreateNamespace(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "released", Namespace: ns}}
	if err := k8s.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	p, err := eventrecorder.New(testBed.Config, scheme, ctrl.Log.WithName("events"), eventrecorder.Options{QueueSize: 2000})
	if err != nil {
		t.Fatal(err)
	}
	rec := p.Recorder("events-test")
	const burst = 1000
	for i := range burst {
		rec.Eventf(cm, nil, corev1.EventTypeNormal, "Released", "Release", "pod %d released", i)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	list, err := testBed.Clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("regarding.name", cm.Name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(list.Items); got != burst || p.Written() != burst {
		t.Fatalf("%d events recorded before shutdown, %d on the apiserver when it returned (%d written)", burst, got, p.Written())
	}
	// An event recorded after shutdown is refused, not lost silently.
	rec.Eventf(cm, nil, corev1.EventTypeNormal, "Late", "Release", "after")
	if err := p.Shutdown(ctx); err == nil {
		t.Fatal("an event recorded after shutdown was not reported as dropped")
	} else {
		t.Log("after shutdown:", err)
	}
}
