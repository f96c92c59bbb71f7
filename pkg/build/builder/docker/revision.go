package docker

import (
	"context"
	"fmt"
	"os"
	"strings"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/source"
)

// One commit for every platform. A Git source names a ref (a branch, a
// tag), and each platform's pod fetches it on its own: a push landing while
// the platforms start would give an index whose images were built from
// different commits. So the ref is resolved once per Build, by the first
// pod to fetch it, and recorded in the Build's spec.revision, where
// OpenShift's builder records the commit it built (hash, author, committer,
// message: what `oc describe build` shows). The record is a write with the
// Build's resourceVersion as precondition, and spec.revision can be set only
// once, so of two pods that fetched different commits exactly one records
// its own; the other reads the recorded one and fetches that. A pod that
// starts after the record builds the recorded commit from the start, as does
// every pod of a Build created with a revision (a webhook's commit).
//
// The pod, not build-controller, resolves the ref: the pod has what a fetch
// needs (the source secret, the proxies, the network path to the Git server,
// the git program), build-controller has none of it and reads no Secret, and
// resolving in the first pod costs the build no step of its own.

// fetchPinned fetches the source at the commit every platform of the Build
// builds: spec.revision's when the Build has one (in $BUILD, or recorded on
// the apiserver since the pod was made), else the commit its ref resolves
// to here, which it records, or else the one another platform recorded
// first, fetched again in its place. It sets d.commit to the commit
// checked out.
func (d *Run) fetchPinned(ctx context.Context, opts source.Options, dir string) (source.Fetched, error) {
	git := source.Type(opts.Source) == buildv1.BuildSourceGit
	pinned := opts.Revision
	if git && commitOf(pinned) == "" && d.Revisions != nil {
		live, err := d.Revisions.Revision(ctx)
		if err != nil {
			return source.Fetched{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed,
				Err: fmt.Errorf("finding the commit the Build's platforms build: %w", err)}
		}
		if commitOf(live) != "" {
			printf(d.log, "Building commit %s, recorded in the Build's spec.revision by another platform's pod\n", commitOf(live))
			pinned = live
		}
	}
	opts.Revision = pinned
	fetched, err := d.fetch(ctx, opts, dir)
	if err != nil {
		return source.Fetched{}, err
	}
	got := commitOf(fetched.Revision)
	if git && commitOf(pinned) == "" && d.Revisions != nil && got != "" {
		recorded, err := d.Revisions.Record(ctx, fetched.Revision)
		if err != nil {
			return source.Fetched{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: err}
		}
		switch want := commitOf(recorded); want {
		case got:
			printf(d.log, "Recorded commit %s in the Build's spec.revision: every platform builds it\n", got)
		case "":
			printf(d.log, "Warning: the Build's spec.revision is set without a commit, so the platforms' commits are not pinned\n")
		default:
			printf(d.log, "%s resolved to %s here, but another platform's pod recorded commit %s first: building that one\n",
				refOf(opts.Source), got, want)
			if err := os.RemoveAll(dir); err != nil {
				return source.Fetched{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: err}
			}
			opts.Revision = recorded
			if fetched, err = d.fetch(ctx, opts, dir); err != nil {
				return source.Fetched{}, err
			}
			pinned = recorded
		}
	}
	// A revision may name a commit by an abbreviated hash (start-build
	// --commit): the full hash checked out starts with it.
	if want, have := commitOf(pinned), commitOf(fetched.Revision); want != "" && !strings.HasPrefix(have, want) {
		return source.Fetched{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed,
			Err: fmt.Errorf("checked out commit %s, not %s, the commit of the Build's spec.revision", have, want)}
	}
	if rev := fetched.Revision; rev != nil && rev.Git != nil {
		d.commit = rev.Git.Commit
		printf(d.log, "Checked out %s (%s)\n", rev.Git.Commit, firstLine(rev.Git.Message))
	}
	return fetched, nil
}

// commitOf is the Git commit a revision names, "" for none.
func commitOf(rev *buildv1.SourceRevision) string {
	if rev == nil || rev.Git == nil {
		return ""
	}
	return rev.Git.Commit
}

// refOf names a Git source's ref for the log.
func refOf(src buildv1.BuildSource) string {
	if src.Git != nil && src.Git.Ref != "" {
		return "The ref " + src.Git.Ref
	}
	return "The default branch"
}
