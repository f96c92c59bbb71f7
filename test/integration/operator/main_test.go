// Package operator tests the placement operator's process on the bed (a
// real kube-apiserver and etcd; no nodes, no registry): its refusal to run
// placement on a ClusterPodPlacementConfig CRD that OLM installed for the
// multiarch tuning operator, its adoption of that CRD when the
// administrator says so, and the conversion webhook's CA written into the
// CRD.
package operator

import (
	"context"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1alpha1 "github.com/archway-build/archway/pkg/apis/multiarch/v1alpha1"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

const namespace = "archway-system"

var (
	testBed *bed.Bed
	k8s     client.Client
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "operator suite",
		Bed:  bed.Options{WithoutNodes: true, WithoutRegistry: true},
		// Both versions of ClusterPodPlacementConfig, for the conversion
		// webhook.
		AddToScheme: []func(*runtime.Scheme) error{multiarchv1alpha1.AddToScheme},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			testBed, k8s = s.Bed, s.Client
			return nil, nil
		},
	}))
}
