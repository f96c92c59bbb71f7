package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/archway-build/archway/test/bed"
)

// clusterWideMarker starts the comment line that says, beside a rule, why
// a write it grants cannot be narrowed to a namespace or to names.
const clusterWideMarker = "Cluster-wide:"

// readOnlyVerbs are the verbs that write nothing.
var readOnlyVerbs = []string{"get", "list", "watch"}

// TestClusterWideWritesHaveReasons reads every ClusterRole of manifests/
// and fails on each rule that grants a write (any verb but get, list and
// watch) on every object of a resource, in every namespace (no
// resourceNames, and the ClusterRole is bound by a ClusterRoleBinding),
// unless a comment line beside the rule starts with "Cluster-wide:" and
// says why it cannot be narrowed (to archway's namespace, to names, or by
// an admission policy). A new broad grant is thus a decision someone wrote
// down, never an accident.
func TestClusterWideWritesHaveReasons(t *testing.T) {
	root := filepath.Join(bed.RepoRoot(), "manifests")
	var docs []manifestDoc
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || strings.Contains(path, filepath.Join("crd", "bases")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(bed.RepoRoot(), path)
		found, err := yamlDocuments(rel, data)
		docs = append(docs, found...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	problems := unexplainedClusterWideWrites(docs)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) == 0 && len(docs) < 20 {
		t.Fatalf("read only %d YAML documents under %s", len(docs), root)
	}
}

// TestUnexplainedClusterWideWrites shows the check failing: a cluster-wide
// write without the marker is reported, one with it, a read, a write
// narrowed by name or a ClusterRole bound only in namespaces is not.
func TestUnexplainedClusterWideWrites(t *testing.T) {
	const manifest = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: broad
rules:
# Reads are fine.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
# A reason without the marker does not count.
- apiGroups: [""]
  resources: [nodes]
  verbs: [patch]
# Cluster-wide: builds run in every namespace.
- apiGroups: [build.openshift.io]
  resources: [builds]
  verbs: [create]
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [one]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: broad
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: broad}
subjects: [{kind: ServiceAccount, name: x, namespace: y}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: per-namespace
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [delete]
`
	docs, err := yamlDocuments("test.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	got := unexplainedClusterWideWrites(docs)
	if len(got) != 1 || !strings.Contains(got[0], "ClusterRole broad") || !strings.Contains(got[0], "nodes") {
		t.Errorf("reported %q, want only the nodes patch of ClusterRole broad", got)
	}
}

// manifestDoc is one YAML document, comments kept, and its file.
type manifestDoc struct {
	file string
	n    *yamlv3.Node
}

// yamlDocuments decodes every document of a YAML stream read from file.
func yamlDocuments(file string, data []byte) ([]manifestDoc, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var out []manifestDoc
	for {
		doc := &yamlv3.Node{}
		if err := dec.Decode(doc); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(doc.Content) == 1 && doc.Content[0].Kind == yamlv3.MappingNode {
			out = append(out, manifestDoc{file: file, n: doc.Content[0]})
		}
	}
}

// field is the value of key in mapping node m, or nil.
func field(m *yamlv3.Node, key string) *yamlv3.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalars(n *yamlv3.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, c.Value)
	}
	return out
}

// unexplainedClusterWideWrites returns, for each rule of a ClusterRole
// bound by a ClusterRoleBinding that writes without resourceNames and has
// no "Cluster-wide:" comment line, what it is and where.
func unexplainedClusterWideWrites(docs []manifestDoc) []string {
	bound := map[string]bool{}
	for _, doc := range docs {
		d := doc.n
		if kind := field(d, "kind"); kind != nil && kind.Value == "ClusterRoleBinding" {
			if ref := field(d, "roleRef"); ref != nil && field(ref, "kind") != nil && field(ref, "kind").Value == "ClusterRole" {
				bound[field(ref, "name").Value] = true
			}
		}
	}
	var out []string
	for _, doc := range docs {
		d := doc.n
		if kind := field(d, "kind"); kind == nil || kind.Value != "ClusterRole" {
			continue
		}
		name := field(field(d, "metadata"), "name").Value
		if !bound[name] {
			continue
		}
		rules := field(d, "rules")
		if rules == nil {
			continue
		}
		for _, r := range rules.Content {
			verbs := scalars(field(r, "verbs"))
			writes := slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return slices.Contains(readOnlyVerbs, v) })
			if len(writes) == 0 || len(scalars(field(r, "resourceNames"))) > 0 {
				continue
			}
			if hasMarker(r.HeadComment) {
				continue
			}
			what := strings.Join(scalars(field(r, "resources")), ",")
			if what == "" {
				what = strings.Join(scalars(field(r, "nonResourceURLs")), ",")
			}
			out = append(out, fmt.Sprintf("%s:%d: ClusterRole %s grants %v on %s in every namespace with no %q line beside the rule saying why it cannot be narrowed",
				doc.file, r.Line, name, writes, what, clusterWideMarker))
		}
	}
	return out
}

// hasMarker says whether a comment has a line starting with the marker.
func hasMarker(comment string) bool {
	for _, line := range strings.Split(comment, "\n") {
		if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#")), clusterWideMarker) {
			return true
		}
	}
	return false
}
