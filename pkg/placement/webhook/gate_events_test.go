package webhook

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// fakeRecorder keeps the events it is given.
type fakeRecorder struct{ events []string }

func (r *fakeRecorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	ref := regarding.(*corev1.ObjectReference)
	r.events = append(r.events, fmt.Sprintf("%s/%s %s %s", ref.Namespace, ref.Name, eventtype, reason))
}

func TestGateEvents(t *testing.T) {
	rec := &fakeRecorder{}
	g := newGateEvents(rec, time.Minute)
	now := time.Unix(1000, 0)
	g.now = func() time.Time { return now }
	ref := func(ns, name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name}
	}

	g.expect("app", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "named"}})
	g.expect("app", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}})
	g.expect("app", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}})

	g.observe(ref("app", "named"), "")
	g.observe(ref("app", "named"), "") // seen again: no second event
	g.observe(ref("app", "web-abcde"), "web-")
	g.observe(ref("app", "web-fghij"), "web-")
	g.observe(ref("app", "web-klmno"), "web-") // admitted by another replica
	g.observe(ref("other", "named"), "")       // another namespace
	want := "[app/named Normal ArchAwareSchedGateAdded app/web-abcde Normal ArchAwareSchedGateAdded app/web-fghij Normal ArchAwareSchedGateAdded]"
	if fmt.Sprint(rec.events) != want {
		t.Errorf("events %v\nwant %s", rec.events, want)
	}

	// A create that failed after admission leaves an expectation that
	// expires.
	g.expect("app", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rejected"}})
	now = now.Add(2 * time.Minute)
	g.expect("app", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "later"}})
	if g.len() != 1 {
		t.Errorf("%d expectations left, want only the live one", g.len())
	}
	g.observe(ref("app", "rejected"), "")
	if len(rec.events) != 3 {
		t.Errorf("an expired expectation recorded an event: %v", rec.events)
	}
}
