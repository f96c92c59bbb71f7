package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestWebhookConfigurationsMatchManifests: every webhook configuration a
// component has its CA injected into is one the manifests create, of that
// kind, so --cert-management=internal and the RBAC resourceNames name
// what is installed.
func TestWebhookConfigurationsMatchManifests(t *testing.T) {
	shipped := map[string]string{} // name -> kind
	err := filepath.WalkDir("../../manifests", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(data), "\n---") {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if yaml.Unmarshal([]byte(doc), &obj) == nil && (strings.HasSuffix(obj.Kind, "WebhookConfiguration") || obj.Kind == "APIService") {
				shipped[obj.Metadata.Name] = obj.Kind
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range components() {
		if c.webhooks == nil {
			continue
		}
		for _, cfg := range c.webhooks() {
			n++
			if kind, ok := shipped[cfg.Name]; !ok || kind != string(cfg.Kind) {
				t.Errorf("component %s injects into %s %s; the manifests have %q", c.name, cfg.Kind, cfg.Name, kind)
			}
		}
	}
	if n == 0 {
		t.Fatal("no component names a webhook configuration")
	}
}

func TestCertManagementFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--cert-management=bogus"}, wantErr: `--cert-management="bogus": use internal or external`},
		{args: []string{"--cert-management=internal", "--webhook-service=svc"}, wantErr: "the Secret's name is required"},
		{args: []string{"--cert-management=internal", "--webhook-cert-secret=s"}, wantErr: "the webhook Service's name is required"},
		{args: []string{"--cert-management=internal", "--webhook-cert-secret=s", "--webhook-service=svc", "--webhook-cert-validity=1h", "--webhook-cert-lookahead=2h"},
			wantErr: "the lookahead 2h0m0s must be shorter than the validity 1h0m0s"},
		{args: []string{"--cert-management=internal", "--webhook-cert-secret=s", "--webhook-service=svc", "--webhook-cert-check-interval=3000h"},
			wantErr: "the check interval 3000h0m0s must be shorter than the lookahead"},
		{args: []string{"--cert-management=internal", "--webhook-cert-secret=s", "--webhook-service=svc"}},
	} {
		opts := &options{}
		if err := newCommand(opts).ParseFlags(append(tc.args, "--controllers=control-plane-protection-webhook", "--webhook-cert-dir="+t.TempDir())); err != nil {
			t.Fatal(err)
		}
		t.Setenv("POD_NAMESPACE", "archway-system")
		enabled, err := enabledComponents(components(), opts.controllers)
		if err != nil {
			t.Fatal(err)
		}
		certs, err := webhookCerts(opts, enabled)
		switch {
		case tc.wantErr == "" && (err != nil || certs == nil):
			t.Errorf("%v: %v, %v", tc.args, certs, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}
