package api

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// getTable asks the apiserver for the table kubectl get prints.
func getTable(t *testing.T, namespace, resource string) *metav1.Table {
	t.Helper()
	cfg := rest.CopyConfig(b.Config)
	cfg.GroupVersion = &buildv1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = unstructuredNegotiator()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	table := &metav1.Table{}
	err = rc.Get().Namespace(namespace).Resource(resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		Do(context.Background()).Into(table)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func columnNames(table *metav1.Table) []string {
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

// rowOf returns the cells of the row named name, by column name.
func rowOf(table *metav1.Table, name string) map[string]any {
	for _, r := range table.Rows {
		if r.Cells[0] == name {
			cells := map[string]any{}
			for i, c := range table.ColumnDefinitions {
				cells[c.Name] = r.Cells[i]
			}
			return cells
		}
	}
	return nil
}

// kubectlGet runs the bed's kubectl get and returns its output.
func kubectlGet(t *testing.T, args ...string) string {
	t.Helper()
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, append([]string{"--kubeconfig", b.Kubeconfig, "get"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestBuildColumns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	build := typedBuild(ns, "app-1")
	build.Spec.Platforms = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	g.Expect(b.Client.Create(ctx, build)).To(Succeed())
	started := metav1.NewTime(time.Now().Add(-10 * time.Minute))
	build.Status = buildv1.BuildStatus{
		Phase:            buildv1.BuildPhaseRunning,
		Reason:           buildv1.StatusReasonPlatformBuildFailed,
		StartTimestamp:   &started,
		DurationSummary:  "1m32s",
		PlatformsSummary: "3/4",
	}
	g.Expect(b.Client.Status().Update(ctx, build)).To(Succeed())
	g.Expect(b.Client.Create(ctx, typedBuild(ns, "app-2"))).To(Succeed())

	table := getTable(t, ns, "builds")
	g.Expect(columnNames(table)).To(Equal([]string{"Name", "Type", "From", "Status", "Started", "Duration", "Platforms", "Reason"}))
	g.Expect(rowOf(table, "app-1")).To(Equal(map[string]any{
		"Name": "app-1", "Type": "Docker", "From": "Dockerfile", "Status": "Running",
		"Started": "10m", "Duration": "1m32s", "Platforms": "3/4", "Reason": "PlatformBuildFailed",
	}))
	g.Expect(rowOf(table, "app-2")).To(HaveKeyWithValue("Status", "New"), "a new Build reads as New")

	lines := strings.Split(strings.TrimSpace(kubectlGet(t, "builds", "-n", ns)), "\n")
	g.Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "TYPE", "FROM", "STATUS", "STARTED", "DURATION", "PLATFORMS"}))
	g.Expect(strings.Fields(lines[1])).To(Equal([]string{"app-1", "Docker", "Dockerfile", "Running", "10m", "1m32s", "3/4"}))
}

func TestBuildConfigColumns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bc := &buildv1.BuildConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec:       buildv1.BuildConfigSpec{CommonSpec: typedBuild(ns, "x").Spec.CommonSpec},
	}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://example.com/app.git"}}
	g.Expect(b.Client.Create(ctx, bc)).To(Succeed())

	table := getTable(t, ns, "buildconfigs")
	g.Expect(columnNames(table)).To(Equal([]string{"Name", "Type", "From", "Latest"}))
	g.Expect(rowOf(table, "app")).To(Equal(map[string]any{"Name": "app", "Type": "Docker", "From": "Git", "Latest": int64(0)}))

	bc.Status.LastVersion = 7
	g.Expect(b.Client.Status().Update(ctx, bc)).To(Succeed())
	lines := strings.Split(strings.TrimSpace(kubectlGet(t, "bc", "-n", ns)), "\n")
	g.Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "TYPE", "FROM", "LATEST"}))
	g.Expect(strings.Fields(lines[1])).To(Equal([]string{"app", "Docker", "Git", "7"}))
}
