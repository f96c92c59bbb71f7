package custombuilds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyReservesTheSameEnv keeps the ValidatingAdmissionPolicy's
// list of reserved variables the webhook's: the two enforce one rule.
func TestPolicyReservesTheSameEnv(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "manifests", "openshift-builds", "custom_builds_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	policy := string(data)
	for _, name := range ReservedEnv {
		if !strings.Contains(policy, "'"+name+"'") {
			t.Errorf("the policy does not reserve %s", name)
		}
	}
	if !strings.Contains(policy, "startsWith('"+reservedEnvPrefix+"')") {
		t.Errorf("the policy does not reserve %s<n>", reservedEnvPrefix)
	}
	_, list, _ := strings.Cut(policy, "n in [")
	list, _, _ = strings.Cut(list, "]")
	if n := strings.Count(list, "', '") + 1; n != len(ReservedEnv) {
		t.Errorf("the policy reserves %d names, the webhook %d", n, len(ReservedEnv))
	}
}
