package plugin

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func newCancelBuild(o *env) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel-build NAME...",
		Short: "Cancel builds",
		Long: `Cancel builds by setting status.cancelled through the status subresource (stock oc cancel-build
writes it through the main resource, which a CRD with a status subresource ignores). The build
controller then stops the build's pods and ends it Cancelled.`,
		Example: "  kubectl archway cancel-build hello-3",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, a := range args {
				name, err := buildName(a)
				if err == nil {
					err = cancelBuild(cmd.Context(), o, name)
				}
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
	}
}

func cancelBuild(ctx context.Context, o *env, name string) error {
	c, _, ns, err := o.clients()
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
	if b.Status.Phase.IsTerminal() {
		_, err := fmt.Fprintf(o.streams.Out, "build.build.openshift.io/%s already ended (%s)\n", name, b.Status.Phase)
		return err
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"cancelled":true}}`))
	if err := c.Status().Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("cancelling build %s: %w", name, err)
	}
	_, err = fmt.Fprintf(o.streams.Out, "build.build.openshift.io/%s cancelled\n", name)
	return err
}
