package docker

import (
	"reflect"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
)

func TestPostCommit(t *testing.T) {
	for _, tc := range []struct {
		spec buildv1.BuildPostCommitSpec
		want *image.PostCommit
	}{
		{buildv1.BuildPostCommitSpec{}, nil},
		{buildv1.BuildPostCommitSpec{Script: "make test"}, &image.PostCommit{Command: []string{"/bin/sh", "-ic", "make test", "/bin/sh"}}},
		{buildv1.BuildPostCommitSpec{Script: "test $1", Args: []string{"-v"}},
			&image.PostCommit{Command: []string{"/bin/sh", "-ic", "test $1", "/bin/sh"}, Args: []string{"-v"}}},
		{buildv1.BuildPostCommitSpec{Command: []string{"make"}, Args: []string{"test"}}, &image.PostCommit{Command: []string{"make"}, Args: []string{"test"}}},
		{buildv1.BuildPostCommitSpec{Args: []string{"--selftest"}}, &image.PostCommit{Args: []string{"--selftest"}}},
	} {
		if got := postCommit(tc.spec); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: got %+v, want %+v", tc.spec, got, tc.want)
		}
	}
}
