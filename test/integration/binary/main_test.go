// Package binary holds the bed tests of binary builds: build-controller's
// instantiatebinary endpoint (authentication by TokenReview, authorization
// by SubjectAccessReview, limits and refusals), the same served through the
// apiserver as an aggregated API (with SCM webhooks), the archive stored once as
// an OCI artifact in the bed's registry, kubectl archway start-build
// --from-dir/--from-file/--from-archive against it, the builder's digest
// check, and the archway:build-starter ClusterRole.
package binary

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/pkg/build/trigger/binary"
	"github.com/archway-build/archway/pkg/registry"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

var (
	suite   *framework.Suite
	testBed *bed.Bed
	// agg is build-triggers' aggregated API, registered with the bed's
	// apiserver (aggregated_test.go).
	agg *aggregatedAPI
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "binary suite",
		Bed:  bed.Options{WithoutNodes: true},
		Setup: func(ctx context.Context, s *framework.Suite) (func(), error) {
			suite, testBed = s, s.Bed
			// The build-starter role, and the strategy roles as installed
			// (docker and source for every authenticated user, custom for
			// no one).
			for _, m := range []string{"manifests/authorization/build_starter_role.yaml", "manifests/authorization/build_strategy_roles.yaml",
				"manifests/authorization/webhook_deliveries_role.yaml"} {
				if err := installManifest(ctx, m); err != nil {
					return nil, err
				}
			}
			aggCtx, stop := context.WithCancel(context.Background())
			var err error
			if agg, err = startAggregated(aggCtx); err != nil {
				stop()
				return nil, fmt.Errorf("the aggregated API: %w", err)
			}
			return stop, nil
		},
	}))
}

// installManifest creates the objects of a manifest of the repository.
func installManifest(ctx context.Context, path string) error {
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), path))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := testBed.Client.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}

// harness is one test's namespace and endpoint.
type harness struct {
	t   testing.TB
	ctx context.Context
	ns  string
	// url and caFile reach the endpoint (an httptest TLS server serving
	// the Handler as build-controller mounts it).
	url, caFile string
	handler     *binary.Handler
}

func newHarness(t testing.TB, prefix string) *harness {
	t.Helper()
	c := suite.NewCase(t, prefix)
	h := &harness{t: t, ctx: c.Ctx, ns: c.NS}
	h.handler = &binary.Handler{
		Client: testBed.Client, Reader: testBed.Client,
		Starter: instantiate.NewStarter(testBed.Client, nil),
		Access:  registry.Access{UserAgent: "archway-test"},
	}
	mux := http.NewServeMux()
	mux.Handle(binary.Pattern, h.handler)
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	h.caFile = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(h.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// repo is the output repository of the test's BuildConfigs.
func (h *harness) repo() string { return "binary/" + h.ns }

// buildConfig creates a BuildConfig with a binary source (or, git, a Git
// one) whose output is in the bed's registry.
func (h *harness) buildConfig(name string, git bool) *buildv1.BuildConfig {
	h.t.Helper()
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{}}
	if git {
		bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://example.com/app.git"}}
	}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: testBed.Registry.Host + "/" + h.repo() + ":v1"}
	if err := testBed.Client.Create(h.ctx, bc); err != nil {
		h.t.Fatal(err)
	}
	return bc
}

// user makes a service account, binds it to clusterRole in the namespace
// ("" binds nothing), and returns a kubeconfig with its token.
func (h *harness) user(name, clusterRole string) string {
	h.t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	if err := testBed.Client.Create(h.ctx, sa); err != nil {
		h.t.Fatal(err)
	}
	if clusterRole != "" {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: h.ns, Name: name}}}
		if err := testBed.Client.Create(h.ctx, rb); err != nil {
			h.t.Fatal(err)
		}
	}
	tok, err := testBed.Clientset.CoreV1().ServiceAccounts(h.ns).CreateToken(h.ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bed"] = &clientcmdapi.Cluster{Server: testBed.Config.Host, CertificateAuthorityData: testBed.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: name, Namespace: h.ns}
	cfg.CurrentContext = "bed"
	path := filepath.Join(h.t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// plugin runs kubectl archway with args and kubeconfig, against the
// harness's endpoint.
func (h *harness) plugin(kubeconfig string, args ...string) (string, error) {
	if args[0] == "start-build" {
		args = append(args, "--build-endpoint", h.url, "--build-endpoint-ca", h.caFile)
	}
	return h.pluginViaAPIServer(kubeconfig, args...)
}

// pluginViaAPIServer runs kubectl archway with args and kubeconfig as a
// user runs it: uploads go through the apiserver (the aggregated API).
func (h *harness) pluginViaAPIServer(kubeconfig string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	args = append(args, "--kubeconfig", kubeconfig, "-n", h.ns)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(h.ctx)
	return out.String(), err
}

// builds lists the namespace's Builds by name.
func (h *harness) builds() []string {
	h.t.Helper()
	var list buildv1.BuildList
	if err := testBed.Client.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	return names
}

// tags lists the tags of the output repository.
func (h *harness) tags() []string {
	h.t.Helper()
	tags, err := testBed.Registry.Tags(h.ctx, h.repo())
	if err != nil {
		h.t.Fatal(err)
	}
	return tags
}

func (h *harness) build(name string) *buildv1.Build {
	h.t.Helper()
	b := &buildv1.Build{}
	if err := testBed.Client.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// tlsConfig trusts the CA in caFile.
func tlsConfig(t testing.TB, caFile string) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(readFile(t, caFile)))
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// waitAllowed waits until the apiserver's authorizer says whether service
// account sa may create builds/<strategy> in the namespace as want (RBAC
// changes reach the authorizer through its informers).
func (h *harness) waitAllowed(sa, strategy string, want bool) {
	h.t.Helper()
	err := framework.Poll(h.ctx, bed.LongTimeout, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + h.ns + ":" + sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + h.ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: h.ns, Verb: "create",
				Group: buildv1.GroupVersion.Group, Resource: "builds", Subresource: strategy},
		}}
		if err := testBed.Client.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed == want, nil
	})
	if err != nil {
		h.t.Fatalf("waiting for %s's builds/%s to be %v: %v", sa, strategy, want, err)
	}
}
