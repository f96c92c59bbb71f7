package policy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/test/bed"
)

// TestStatusCountsPods: a policy's status counts the pods it was applied
// to, written at most once per flush interval however fast pods come.
func TestStatusCountsPods(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	p := nsPolicy(ns, "counted", 0, matchLabels("app", "counted"), kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"pool": "counted"},
	})
	createPolicy(t, p)
	wc, err := client.NewWithWatch(testBed.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &kupidv1alpha1.PodSchedulingPolicyList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: p.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	const pods = 30
	start := time.Now()
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			_ = k8s.Create(ctx, makePod(ns, fmt.Sprintf("p-%d", i)).label("app", "counted").obj())
		})
	}
	// A pod the policy does not select is not counted.
	createPod(t, makePod(ns, "other").label("app", "other").obj())
	wg.Wait()

	updates := 0
	var last *kupidv1alpha1.PodSchedulingPolicy
	timeout := time.After(bed.DefaultTimeout)
	for last == nil || last.Status.MatchedPods < pods {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified {
				updates++
				last = ev.Object.(*kupidv1alpha1.PodSchedulingPolicy)
			}
		case <-timeout:
			t.Fatalf("status never counted %d pods; last: %+v", pods, last)
		}
	}
	elapsed := time.Since(start)
	if last.Status.MatchedPods != pods {
		t.Errorf("matchedPods = %d, want %d", last.Status.MatchedPods, pods)
	}
	if lt := last.Status.LastAppliedTime; lt == nil || lt.Time.Before(start.Truncate(time.Second)) {
		t.Errorf("lastAppliedTime = %v, want a time after the test started (%v)", lt, start)
	}
	// One write per flush at most: never one per pod.
	if maxWrites := int(elapsed/flushInterval) + 1; updates > maxWrites {
		t.Errorf("%d status writes in %v, more than one per %v flush interval (%d)", updates, elapsed, flushInterval, maxWrites)
	}
	t.Logf("%d pods counted in %d status writes over %v", pods, updates, elapsed.Round(time.Millisecond))
}

// TestStatusReplicasDoNotLoseCounts: two replicas flushing counts for the
// same policy at the same time conflict on the apiserver; each retries, and
// the status ends with the sum of both.
func TestStatusReplicasDoNotLoseCounts(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	p := nsPolicy(ns, "shared", 0, nil, kupidv1alpha1.SchedulingCriteria{})
	createPolicy(t, p)
	ref := policy.Policy{Kind: policy.KindPodSchedulingPolicy, Namespace: ns, Name: p.Name, UID: p.UID}
	replicas := []*policy.StatusRecorder{
		policy.NewStatusRecorder(k8s, k8s, time.Hour, nil, logr.Discard()),
		policy.NewStatusRecorder(k8s, k8s, time.Hour, nil, logr.Discard()),
	}
	const rounds, perRound = 10, 7
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() {
			for range rounds {
				for range perRound {
					r.Record(ref, time.Now())
				}
				r.Flush(ctx)
			}
			// Flush until what conflicted is written.
			_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
				r.Flush(ctx)
				return len(r.Pending()) == 0, nil
			})
		})
	}
	wg.Wait()
	got := &kupidv1alpha1.PodSchedulingPolicy{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if want := int64(len(replicas) * rounds * perRound); got.Status.MatchedPods != want {
		t.Fatalf("matchedPods = %d, want %d (both replicas' counts)", got.Status.MatchedPods, want)
	}
}

// TestStatusCountsKeptOnShutdown: what a replica counted is written when it
// is told to stop, even when another replica's write conflicts with it, and
// a pod admitted after the recorder stopped (the webhook server stops last)
// is still counted.
func TestStatusCountsKeptOnShutdown(t *testing.T) {
	ns := newNamespace(t, nil)
	p := nsPolicy(ns, "draining", 0, nil, kupidv1alpha1.SchedulingCriteria{})
	createPolicy(t, p)
	ref := policy.Policy{Kind: policy.KindPodSchedulingPolicy, Namespace: ns, Name: p.Name, UID: p.UID}
	// The informer cache's role is played by a reader that always answers
	// with the policy as created: every write from it conflicts once the
	// status changed, as a lagging cache's would.
	stale := p.DeepCopy()
	stopping := policy.NewStatusRecorder(staleReader{obj: stale}, k8s, time.Hour, nil, logr.Discard())
	other := policy.NewStatusRecorder(k8s, k8s, time.Hour, nil, logr.Discard())
	policy.SetDirectReader(stopping, k8s)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- stopping.Start(ctx) }()
	for range 5 {
		stopping.Record(ref, time.Now())
	}
	// Another replica writes first: the stopping one's write conflicts.
	other.Record(ref, time.Now())
	other.Flush(context.Background())
	if len(other.Pending()) != 0 {
		t.Fatalf("the other replica's count was not written: %v", other.Pending())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Admitted after the recorder stopped.
	stopping.Record(ref, time.Now())
	stopping.Record(ref, time.Now())

	got := &kupidv1alpha1.PodSchedulingPolicy{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.MatchedPods != 8 {
		t.Fatalf("matchedPods = %d, want 8 (5 pending at the stop, 1 from the other replica, 2 after the stop)", got.Status.MatchedPods)
	}
}

// staleReader answers every Get with obj as it was.
type staleReader struct {
	client.Reader
	obj client.Object
}

func (s staleReader) Get(_ context.Context, _ client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	s.obj.(*kupidv1alpha1.PodSchedulingPolicy).DeepCopyInto(out.(*kupidv1alpha1.PodSchedulingPolicy))
	return nil
}
