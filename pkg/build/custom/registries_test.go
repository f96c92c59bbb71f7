package custom

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The files as OpenShift's build controller writes them into the Build's
// <build>-sys-config ConfigMap: an ImageContentSourcePolicy's mirror and an
// insecure registry in registries.conf, the image config's
// allowedRegistries (or blockedRegistries) in policy.json.
const (
	openshiftRegistriesConf = `unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]

[[registry]]
  prefix = ""
  location = "quay.io/team"
  mirror-by-digest-only = true

  [[registry.mirror]]
    location = "mirror.example.com/team"

[[registry]]
  prefix = ""
  location = "insecure.example.com"
  insecure = true
`
	openshiftAllowedPolicy = `{"default":[{"type":"reject"}],"transports":{
"atomic":{"quay.io":[{"type":"insecureAcceptAnything"}],"mirror.example.com":[{"type":"insecureAcceptAnything"}]},
"containers-storage":{"":[{"type":"insecureAcceptAnything"}]},
"docker":{"quay.io":[{"type":"insecureAcceptAnything"}],"mirror.example.com":[{"type":"insecureAcceptAnything"}]}}}`
	openshiftBlockedPolicy = `{"default":[{"type":"insecureAcceptAnything"}],"transports":{
"atomic":{"blocked.example.com":[{"type":"reject"}]},
"containers-storage":{"":[{"type":"insecureAcceptAnything"}]},
"docker":{"blocked.example.com":[{"type":"reject"}]}}}`
)

func TestClusterRegistries(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	conf := write("registries.conf", openshiftRegistriesConf)
	allowedPolicy := write("allowed.json", openshiftAllowedPolicy)
	blockedPolicy := write("blocked.json", openshiftBlockedPolicy)
	rejectAll := write("reject.json", `{"default":[{"type":"reject"}],"transports":{"containers-storage":{"":[{"type":"insecureAcceptAnything"}]}}}`)
	badConf := write("bad.conf", "[[registry]]\nlocation = 1\n")
	badPolicy := write("bad.json", "{")
	missing := filepath.Join(dir, "absent")

	for _, tc := range []struct {
		name    string
		env     map[string]string
		conf    string
		allowed []string
		err     string
	}{
		{name: "not on OpenShift: no variables"},
		{name: "a cluster that configures nothing: no files",
			env: map[string]string{RegistriesConfPathEnv: missing, SignaturePolicyPathEnv: missing}},
		{name: "mirrors and allowed registries",
			env:  map[string]string{RegistriesConfPathEnv: conf, SignaturePolicyPathEnv: allowedPolicy},
			conf: openshiftRegistriesConf, allowed: []string{"mirror.example.com", "quay.io"}},
		{name: "blocked registries restrict no scope",
			env:  map[string]string{RegistriesConfPathEnv: conf, SignaturePolicyPathEnv: blockedPolicy},
			conf: openshiftRegistriesConf},
		{name: "a policy that allows no registry",
			env: map[string]string{SignaturePolicyPathEnv: rejectAll}, err: "allows images from no registry"},
		{name: "a registries.conf that does not parse",
			env: map[string]string{RegistriesConfPathEnv: badConf}, err: "bad.conf ($BUILD_REGISTRIES_CONF_PATH)"},
		{name: "a policy.json that does not parse",
			env: map[string]string{SignaturePolicyPathEnv: badPolicy}, err: "policy.json ($BUILD_SIGNATURE_POLICY_PATH)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotConf, gotAllowed, err := ClusterRegistries(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if gotConf != tc.conf {
				t.Errorf("registries.conf %q, want %q", gotConf, tc.conf)
			}
			if diff := cmp.Diff(tc.allowed, gotAllowed); diff != "" {
				t.Errorf("allowed registries (-want +got):\n%s", diff)
			}
		})
	}
}
