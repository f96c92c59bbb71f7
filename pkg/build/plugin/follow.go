package plugin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// followPoll is how often a followed build is read.
const followPoll = 500 * time.Millisecond

// follower follows a build to its end: it prints the per-platform table
// whenever a platform's phase, reason or node changes (table) and streams
// every pod's log as the pod starts (logs).
type follower struct {
	c     client.Client
	cs    kubernetes.Interface
	ns    string
	name  string
	out   io.Writer
	logs  bool
	table bool
	// only, when set, streams the logs of this pod's platform alone (as
	// podsOfPlatform picks it); its prefix is then left out.
	only string
}

func (f *follower) run(ctx context.Context) (*buildv1.Build, error) {
	w := &lineWriter{out: f.out}
	streaming := map[string]bool{}
	var wg sync.WaitGroup
	logCtx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	last := ""
	var final *buildv1.Build
	err := wait.PollUntilContextCancel(ctx, followPoll, true, func(ctx context.Context) (bool, error) {
		b := &buildv1.Build{}
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.name}, b); err != nil {
			return false, err
		}
		pods, err := buildPods(ctx, f.cs, f.ns, f.name)
		if err != nil {
			return false, err
		}
		if f.table {
			// Printed again when the build's phase or a platform's row
			// changes, so the last table says how the build ended.
			if t := phaseOf(b) + "\n" + platformTable(b, pods, false); t != last {
				last = t
				w.block(fmt.Sprintf("%s  build %s %s", time.Now().Format("15:04:05"), b.Name, t))
			}
		}
		if f.logs {
			multi := (len(pods) > 1 || len(b.Status.Platforms) > 1) && f.only == ""
			for i := range pods {
				p := pods[i]
				if streaming[p.pod.Name] || !podStarted(&p.pod) {
					continue
				}
				if f.only != "" {
					if picked, err := podsOfPlatform([]buildPod{p}, f.only); err != nil || len(picked) == 0 {
						continue
					}
				}
				streaming[p.pod.Name] = true
				prefix := ""
				if multi {
					prefix = p.platform
				}
				wg.Go(func() {
					if err := streamLogs(logCtx, f.cs, &p.pod, true, prefix, w); err != nil {
						w.line(prefix, "error: "+err.Error())
					}
				})
			}
		}
		if b.Status.Phase.IsTerminal() {
			final = b
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	// The pods have ended or are ending: their logs end soon; bound the
	// wait for a kubelet that never closes a stream.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		stopLogs()
		<-done
	}
	return final, nil
}

func phaseOf(b *buildv1.Build) string {
	s := string(b.Status.Phase)
	if s == "" {
		s = string(buildv1.BuildPhaseNew)
	}
	if b.Status.PlatformsSummary != "" {
		s += " (" + b.Status.PlatformsSummary + ")"
	}
	return s
}

// platformTable is the per-platform table: platform, phase, reason, node,
// and (withDetails) digest and duration; when a platform is built under
// emulation, a column with the architecture of the node it runs on.
func platformTable(b *buildv1.Build, pods []buildPod, withDetails bool) string {
	nodes := map[string]string{}
	for _, p := range pods {
		nodes[p.pod.Name] = p.pod.Spec.NodeName
	}
	emulated := slices.ContainsFunc(b.Status.Platforms, func(e buildv1.BuildStatusPlatform) bool { return e.EmulatedOn != "" })
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	header := []string{"PLATFORM", "PHASE", "REASON", "NODE"}
	if emulated {
		header = append(header, "EMULATED ON")
	}
	if withDetails {
		header = append(header, "DIGEST", "DURATION")
	}
	_, _ = fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, e := range b.Status.Platforms {
		phase := string(e.Phase)
		if phase == "" {
			phase = string(buildv1.BuildPhaseNew)
		}
		row := []string{e.Platform, phase, dash(string(e.Reason)), dash(nodes[e.PodName])}
		if emulated {
			row = append(row, dash(e.EmulatedOn))
		}
		if withDetails {
			digest := ""
			if e.Output != nil {
				digest = e.Output.ImageDigest
			}
			row = append(row, dash(digest), dash(duration(e.StartTimestamp, e.CompletionTimestamp)))
		}
		_, _ = fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
	return buf.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
