package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

func newLogs(o *env) *cobra.Command {
	var platformFlag string
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs build/NAME",
		Short: "Print the logs of a build's pods, per platform",
		Long: `Print the logs of a build: every platform's pod, then the manifest-list pod. With more than one
pod each line starts with its platform ("[linux/arm64] ..."); --platform picks one. With -f on a build that
has not ended, it streams each pod's log from when the pod starts until the build ends.`,
		Example: `  kubectl archway logs build/hello-3 -f
  kubectl archway logs build/hello-3 --platform linux/arm64`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := buildName(args[0])
			if err != nil {
				return err
			}
			return runLogs(cmd.Context(), o, name, platformFlag, follow)
		},
	}
	cmd.Flags().StringVar(&platformFlag, "platform", "", "only this platform's pod (e.g. linux/arm64), or manifest-list")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream the logs")
	return cmd
}

func runLogs(ctx context.Context, o *env, name, want string, follow bool) error {
	c, cs, ns, err := o.clients()
	if err != nil {
		return err
	}
	b := &buildv1.Build{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("build %q not found in namespace %q", name, ns)
		}
		return err
	}
	if follow && !b.Status.Phase.IsTerminal() {
		// A running build: its logs until it ends, each pod's from when it
		// starts (platforms still pending, the manifest-list pod).
		if want != "" && want != manifestListLabel {
			if _, err := platform.Parse(want); err != nil {
				return fmt.Errorf("--platform %s: %w", want, err)
			}
		}
		f := &follower{c: c, cs: cs, ns: ns, name: name, out: o.streams.Out, logs: true, only: want}
		_, err := f.run(ctx)
		return err
	}
	pods, err := buildPods(ctx, cs, ns, name)
	if err != nil {
		return err
	}
	if want != "" {
		pods, err = podsOfPlatform(pods, want)
		if err != nil {
			return err
		}
	}
	var started []buildPod
	for _, p := range pods {
		if podStarted(&p.pod) {
			started = append(started, p)
		}
	}
	if len(started) == 0 {
		return fmt.Errorf("build %s has no pod with logs yet (phase %s)", name, phaseOf(b))
	}
	w := &lineWriter{out: o.streams.Out}
	multi := len(pods) > 1
	prefix := func(p buildPod) string {
		if multi {
			return p.platform
		}
		return ""
	}
	if !follow {
		for _, p := range started {
			if err := streamLogs(ctx, cs, &p.pod, false, prefix(p), w); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(started))
	for i, p := range started {
		wg.Go(func() { errs[i] = streamLogs(ctx, cs, &p.pod, true, prefix(p), w) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// podsOfPlatform keeps the pod of one platform (compared normalized,
// linux/arm64 = linux/arm64/v8), or the manifest-list pod.
func podsOfPlatform(pods []buildPod, want string) ([]buildPod, error) {
	var have []string
	for _, p := range pods {
		have = append(have, p.platform)
		if p.platform == want {
			return []buildPod{p}, nil
		}
		if wp, err := platform.Parse(want); err == nil {
			if pp, err := platform.Parse(p.platform); err == nil && wp.Equal(pp) {
				return []buildPod{p}, nil
			}
		}
	}
	return nil, fmt.Errorf("--platform %s: the build has no pod for it; its pods are for: %v", want, have)
}
