package docker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/source"
)

var (
	commitX = strings.Repeat("1", 40)
	commitY = strings.Repeat("2", 40)
)

// revisions plays the Build's spec.revision on the apiserver.
type revisions struct {
	mu sync.Mutex
	// live is what the Build has; recordErr fails Record.
	live      *buildv1.SourceRevision
	readErr   error
	recordErr error
	// recorded counts the records that set live.
	recorded int
	// beforeRecord, when set, runs before a record compares (another
	// platform recording first).
	beforeRecord func(r *revisions)
}

func (r *revisions) Revision(context.Context) (*buildv1.SourceRevision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live, r.readErr
}

func (r *revisions) Record(_ context.Context, rev *buildv1.SourceRevision) (*buildv1.SourceRevision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.beforeRecord != nil {
		r.beforeRecord(r)
	}
	if r.recordErr != nil {
		return nil, r.recordErr
	}
	if r.live == nil {
		r.live = rev
		r.recorded++
	}
	return r.live, nil
}

func gitRev(commit string) *buildv1.SourceRevision {
	return &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: commit, Message: "msg " + commit[:4]}}
}

// gitBuild is dockerfileBuild with a Git source at branch main.
func gitBuild() *buildv1.Build {
	b := dockerfileBuild()
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://git.example.com/app.git", Ref: "main"}}
	return b
}

// branch plays a Git server whose main is at tip: a fetch of main checks
// out tip, a fetch of a commit checks that commit out. It records what
// each fetch asked for.
type branch struct {
	mu      sync.Mutex
	tip     string
	fetches []string
}

func (g *branch) fetch(_ context.Context, opts source.Options, dir string) (source.Fetched, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	commit := g.tip
	asked := opts.Source.Git.Ref
	if c := commitOf(opts.Revision); c != "" {
		commit, asked = c, c
	}
	g.fetches = append(g.fetches, asked)
	return source.Fetched{Root: dir, ContextDir: dir, Dockerfile: dir + "/Dockerfile", Revision: gitRev(commit)}, nil
}

func TestOneCommitForEveryPlatform(t *testing.T) {
	tests := []struct {
		name string
		// spec is the Build's spec.revision in $BUILD; live what the
		// apiserver has when the pod starts.
		spec, live *buildv1.SourceRevision
		// another records commitY as another platform would, between this
		// pod's fetch and its record.
		another     bool
		wantCommit  string
		wantFetches []string
		wantRecords int
		wantLog     string
	}{
		{name: "the first platform records the commit its fetch resolved",
			wantCommit: commitX, wantFetches: []string{"main"}, wantRecords: 1,
			wantLog: "Recorded commit " + commitX + " in the Build's spec.revision"},
		{name: "a platform starting after the record builds the recorded commit", live: gitRev(commitY),
			wantCommit: commitY, wantFetches: []string{commitY},
			wantLog: "Building commit " + commitY + ", recorded in the Build's spec.revision by another platform's pod"},
		{name: "a platform that lost the race fetches the recorded commit", another: true,
			wantCommit: commitY, wantFetches: []string{"main", commitY},
			wantLog: "The ref main resolved to " + commitX + " here, but another platform's pod recorded commit " + commitY + " first"},
		{name: "a Build created with a revision builds it", spec: gitRev(commitY),
			wantCommit: commitY, wantFetches: []string{commitY}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := gitBuild()
			b.Spec.Revision = tt.spec
			git := &branch{tip: commitX}
			revs := &revisions{live: tt.live}
			if tt.another {
				revs.beforeRecord = func(r *revisions) {
					if r.live == nil {
						r.live = gitRev(commitY)
					}
				}
			}
			run, rep, out := newRun(t, b, &builder{})
			run.Fetch, run.Revisions = git.fetch, revs
			if err := run.Do(context.Background()); err != nil {
				t.Fatalf("Do: %v\n%s", err, out)
			}
			if rep.complete.Commit != tt.wantCommit {
				t.Errorf("reported commit %q, want %q", rep.complete.Commit, tt.wantCommit)
			}
			if got := strings.Join(git.fetches, " "); got != strings.Join(tt.wantFetches, " ") {
				t.Errorf("fetched %s, want %s", got, strings.Join(tt.wantFetches, " "))
			}
			if revs.recorded != tt.wantRecords {
				t.Errorf("recorded %d times, want %d", revs.recorded, tt.wantRecords)
			}
			if !strings.Contains(out.String(), tt.wantLog) {
				t.Errorf("log does not say %q:\n%s", tt.wantLog, out)
			}
		})
	}
}

// TestOneCommitFailures: a pod that cannot learn or record the Build's
// commit builds nothing rather than a commit of its own.
func TestOneCommitFailures(t *testing.T) {
	for _, tt := range []struct {
		name string
		revs *revisions
		want string
	}{
		{name: "reading spec.revision fails", revs: &revisions{readErr: errors.New("apiserver unreachable")},
			want: "finding the commit the Build's platforms build: apiserver unreachable"},
		{name: "recording it fails", revs: &revisions{recordErr: errors.New("forbidden")}, want: "forbidden"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ib := &builder{}
			run, rep, out := newRun(t, gitBuild(), ib)
			run.Fetch, run.Revisions = (&branch{tip: commitX}).fetch, tt.revs
			if err := run.Do(context.Background()); err == nil {
				t.Fatalf("Do succeeded, want a failure\n%s", out)
			}
			if rep.failure == nil || rep.failure.Reason != buildv1.StatusReasonFetchSourceFailed || !strings.Contains(rep.failure.Message, tt.want) {
				t.Errorf("reported %+v, want FetchSourceFailed saying %q", rep.failure, tt.want)
			}
			if ib.dest != "" {
				t.Error("an image was built")
			}
		})
	}
}

// TestOneCommitNotForOtherSources: a Build of an inline Dockerfile has no
// commit to pin and asks the apiserver nothing.
func TestOneCommitNotForOtherSources(t *testing.T) {
	revs := &revisions{readErr: errors.New("asked")}
	run, rep, out := newRun(t, dockerfileBuild(), &builder{})
	run.Revisions = revs
	if err := run.Do(context.Background()); err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	if rep.complete.Commit != "" || revs.recorded != 0 {
		t.Errorf("commit %q, %d records: want none", rep.complete.Commit, revs.recorded)
	}
}
