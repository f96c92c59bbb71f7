package instantiate

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// InvalidMessage is the apiserver's validation message of a refused Build
// (a platforms override, a binary build's request), each cause as the API
// says it; any other error's own text.
func InvalidMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		var parts []string
		for _, c := range st.Status().Details.Causes {
			parts = append(parts, c.Field+": "+c.Message)
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return err.Error()
}
