package bed

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// NewScheme returns a scheme with Kubernetes' and archway's API types, for
// the bed's client and for managers started by tests.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(buildv1.AddToScheme(s))
	utilruntime.Must(multiarchv1beta1.AddToScheme(s))
	return s
}
