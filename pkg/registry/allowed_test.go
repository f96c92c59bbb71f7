package registry

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
)

func TestScopeAllows(t *testing.T) {
	scopes := []string{"quay.io/team", "*.example.com", "localhost:5000", "docker.io/library"}
	for repo, want := range map[string]bool{
		"quay.io/team/app":               true,
		"quay.io/team":                   true,
		"quay.io/other/app":              false,
		"quay.io/teamother/app":          false,
		"evilquay.io/team/app":           false,
		"quay.io.evil.example.org/team/": false,
		"registry.example.com/x/y":       true,
		"a.b.example.com:443/x":          true,
		"example.com/x":                  false,
		"registry.example.com.evil/x":    false,
		"localhost:5000/x":               true,
		"localhost:5001/x":               false,
		"localhost/x":                    false,
		"docker.io/library/busybox":      true,
		"docker.io/someone/busybox":      false,
	} {
		if got := ScopeAllows(scopes, repo); got != want {
			t.Errorf("ScopeAllows(%s) = %v, want %v", repo, got, want)
		}
	}
	if !ScopeAllows(nil, "anything/x") {
		t.Error("no scopes must allow every repository")
	}
}

// The policy AllowedPolicy writes is one containers/image reads, and
// CheckBlocked refuses by it what it leaves out, pull or push, before the
// registries.conf is consulted.
func TestAllowedPolicy(t *testing.T) {
	data, err := AllowedPolicy([]string{"quay.io/team", "*.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signature.NewPolicyFromBytes(data); err != nil {
		t.Fatalf("containers/image refuses the policy: %v\n%s", err, data)
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sys := &types.SystemContext{SignaturePolicyPath: path, SystemRegistriesConfPath: conf, SystemRegistriesConfDirPath: t.TempDir()}
	for ref, allowed := range map[string]bool{
		"quay.io/team/app:v1":                    true,
		"r.example.com/base@sha256:" + hexDigest: true,
		"quay.io/other/app:v1":                   false,
		"busybox":                                false,
	} {
		err := CheckBlocked(sys, ref, false)
		var blocked *BlockedError
		switch {
		case allowed && err != nil:
			t.Errorf("%s: %v", ref, err)
		case !allowed && (!errors.As(err, &blocked) || !blocked.NotAllowed):
			t.Errorf("%s: %v, want a BlockedError not allowed", ref, err)
		}
	}
	if _, err := AllowedPolicy(nil); err == nil {
		t.Error("a policy allowing nothing: no error")
	}
	if _, err := AllowedPolicy([]string{"quay.io/x@sha256:1"}); err == nil {
		t.Error("a scope with a digest: no error")
	}
	// The embedded accept-everything policy restricts nothing.
	if _, restricted, err := PolicyAllowed(""); restricted || err != nil {
		t.Errorf("no policy: restricted %v, %v", restricted, err)
	}
}

const hexDigest = "0123456789012345678901234567890123456789012345678901234567890123"
