package image

import "testing"

func TestResultStoreFor(t *testing.T) {
	cache := &Cache{Repository: "registry.example/cache"}
	hook := &PostCommit{Command: []string{"true"}}
	for _, tc := range []struct {
		name string
		req  Request
		dest string
		want resultStore
	}{
		{"built only, no reuse: nowhere", Request{}, "", nil},
		{"built only, reusing: the work directory", Request{ReuseResults: true}, "", workDirResults{}},
		{"built only with a layer cache: the work directory", Request{ReuseResults: true, Cache: cache}, "", workDirResults{}},
		{"pushed with a layer cache: the layer cache", Request{Cache: cache}, "registry.example/app", cacheRepoResults{}},
		{"pushed with a layer cache, reusing: the layer cache", Request{ReuseResults: true, Cache: cache}, "registry.example/app", cacheRepoResults{}},
		{"pushed with a hook: the work directory", Request{ReuseResults: true, Cache: cache, PostCommit: hook}, "registry.example/app", workDirResults{}},
		{"pushed without a layer cache: the work directory", Request{ReuseResults: true}, "registry.example/app", workDirResults{}},
		{"pushed with a hook, no reuse: nowhere", Request{Cache: cache, PostCommit: hook}, "registry.example/app", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultStoreFor(tc.req, tc.dest); got != tc.want {
				t.Errorf("resultStoreFor = %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestResultStoreKeys: the layer cache keys a result without its labels
// (the push applies them), the work directory with them.
func TestResultStoreKeys(t *testing.T) {
	k := newKeyTest(t)
	keys := func() (workDir, cacheRepo string) {
		in := k.keyed()
		var err error
		if workDir, err = (workDirResults{}).key(k.req, in); err != nil {
			t.Fatal(err)
		}
		if cacheRepo, err = (cacheRepoResults{}).key(k.req, in); err != nil {
			t.Fatal(err)
		}
		return workDir, cacheRepo
	}
	w1, c1 := keys()
	k.req.Labels = map[string]string{"io.openshift.build.name": "app-2"}
	w2, c2 := keys()
	if c1 == "" || c1 != c2 {
		t.Errorf("the layer cache's key changed with the labels: %q, %q", c1, c2)
	}
	if w1 == w2 {
		t.Errorf("the work directory's key did not change with the labels: %q", w1)
	}
}
