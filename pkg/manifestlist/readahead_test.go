package manifestlist

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/archway-build/archway/pkg/registry"
)

// fakeReads is a ReadFunc's registry: it counts reads, fails those of
// digests in fail and holds those in hang until their context ends.
type fakeReads struct {
	mu        sync.Mutex
	calls     []Entry
	fail      map[string]bool
	hang      map[string]bool
	started   chan Entry
	cancelled chan Entry
}

func newFakeReads() *fakeReads {
	return &fakeReads{fail: map[string]bool{}, hang: map[string]bool{}, started: make(chan Entry, 16), cancelled: make(chan Entry, 16)}
}

func (f *fakeReads) read(ctx context.Context, output string, e Entry) (Child, error) {
	f.mu.Lock()
	f.calls = append(f.calls, e)
	f.mu.Unlock()
	f.started <- e
	if f.hang[e.Digest.String()] {
		<-ctx.Done()
		f.cancelled <- e
		return Child{}, ctx.Err()
	}
	if f.fail[e.Digest.String()] {
		return Child{}, errors.New("registry unreachable")
	}
	// os.version marks what was read and where from.
	return Child{Entry: e, MediaType: ocispec.MediaTypeImageManifest, Size: 7,
		Config: ocispec.Platform{OS: "linux", Architecture: "arm64", OSVersion: output + "@" + e.Digest.String()}}, nil
}

func (f *fakeReads) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

const aheadOutput = "registry.example.com/team/app:v1"

func TestReadAheadChild(t *testing.T) {
	arm64 := Entry{Platform: "linux/arm64", Digest: fakeDigest("a")}
	recorded := arm64
	recorded.Recorded = ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	for _, tt := range []struct {
		name   string
		start  []Entry
		fail   bool
		output string
		ask    Entry
		want   bool
	}{
		{name: "the digest read for the platform", start: []Entry{arm64}, ask: recorded, want: true},
		{name: "another digest for the platform", start: []Entry{arm64}, ask: Entry{Platform: "linux/arm64", Digest: fakeDigest("b")}},
		{name: "the digest read, for another platform", start: []Entry{arm64}, ask: Entry{Platform: "linux/amd64", Digest: fakeDigest("a")}},
		{name: "the platform reported another digest since", start: []Entry{arm64, {Platform: "linux/arm64", Digest: fakeDigest("b")}}, ask: arm64},
		{name: "another output", start: []Entry{arm64}, output: "registry.example.com/team/other:v1", ask: arm64},
		{name: "the read failed", start: []Entry{arm64}, fail: true, ask: arm64},
		{name: "nothing read", ask: arm64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeReads()
			f.fail[arm64.Digest.String()] = tt.fail
			a := NewReadAhead(context.Background(), aheadOutput, f.read)
			defer a.Close()
			for _, e := range tt.start {
				a.Start(e)
			}
			output := aheadOutput
			if tt.output != "" {
				output = tt.output
			}
			c, ok := a.Child(context.Background(), output, tt.ask)
			if ok != tt.want {
				t.Fatalf("Child(%s %s) found %v, want %v", tt.ask.Platform, tt.ask.Digest, ok, tt.want)
			}
			if !ok {
				return
			}
			if c.Entry.Digest != tt.ask.Digest || c.Entry.Recorded.Variant != tt.ask.Recorded.Variant || c.Config.OSVersion != aheadOutput+"@"+tt.ask.Digest.String() {
				t.Errorf("Child = %+v, want the read of %s with the entry asked for", c, tt.ask.Digest)
			}
		})
	}
	var none *ReadAhead
	if _, ok := none.Child(context.Background(), aheadOutput, arm64); ok {
		t.Errorf("a nil ReadAhead found a child")
	}
}

// TestReadAheadReadsOnce: a digest is read once however often its
// platform's entry is seen; another digest for the platform stops the
// read of the first.
func TestReadAheadReadsOnce(t *testing.T) {
	f := newFakeReads()
	first, second := Entry{Platform: "linux/arm64", Digest: fakeDigest("a")}, Entry{Platform: "linux/arm64", Digest: fakeDigest("b")}
	f.hang[first.Digest.String()] = true
	a := NewReadAhead(context.Background(), aheadOutput, f.read)
	defer a.Close()
	a.Start(first)
	<-f.started
	a.Start(first)
	a.Start(second)
	select {
	case e := <-f.cancelled:
		if e.Digest != first.Digest {
			t.Errorf("stopped the read of %s, want %s", e.Digest, first.Digest)
		}
	case <-time.After(time.Minute):
		t.Fatal("the read of the first digest was not stopped when the platform reported another")
	}
	if _, ok := a.Child(context.Background(), aheadOutput, second); !ok {
		t.Errorf("the second digest was not read")
	}
	if n := f.count(); n != 2 {
		t.Errorf("%d reads, want 2: each digest once", n)
	}
}

// TestReadAheadClose: Close stops the reads under way and returns once
// they have ended; nothing starts after it.
func TestReadAheadClose(t *testing.T) {
	f := newFakeReads()
	e := Entry{Platform: "linux/arm64", Digest: fakeDigest("a")}
	f.hang[e.Digest.String()] = true
	a := NewReadAhead(context.Background(), aheadOutput, f.read)
	a.Start(e)
	<-f.started
	a.Close()
	select {
	case <-f.cancelled:
	default:
		t.Fatal("Close returned with a read under way")
	}
	a.Start(Entry{Platform: "linux/amd64", Digest: fakeDigest("b")})
	if n := f.count(); n != 1 {
		t.Errorf("%d reads, want none started after Close", n)
	}
}

// TestFetchChildrenTakesReadAhead: FetchChildren reads only the entries
// the ReadAhead has not read: with every entry read ahead, a registry that
// refuses connections is never asked; an entry read as another digest is
// read again (and fails, naming its platform).
func TestFetchChildrenTakesReadAhead(t *testing.T) {
	const output = "127.0.0.1:1/team/app:v1" // nothing listens: any read fails
	entries := []Entry{{Platform: "linux/amd64", Digest: fakeDigest("a")}, {Platform: "linux/arm64", Digest: fakeDigest("b")}}
	f := newFakeReads()
	a := NewReadAhead(context.Background(), output, f.read)
	defer a.Close()
	for _, e := range entries {
		a.Start(e)
	}
	children, err := FetchChildren(context.Background(), Options{Output: output, Entries: entries, Access: registry.Access{}, ReadAhead: a})
	if err != nil {
		t.Fatalf("FetchChildren: %v", err)
	}
	for i, c := range children {
		if c.Digest != entries[i].Digest || c.Config.OSVersion != output+"@"+entries[i].Digest.String() {
			t.Errorf("child %d = %+v, want the read ahead of %s", i, c, entries[i].Digest)
		}
	}
	moved := []Entry{entries[0], {Platform: "linux/arm64", Digest: fakeDigest("c")}}
	_, err = FetchChildren(context.Background(), Options{Output: output, Entries: moved, Access: registry.Access{}, ReadAhead: a})
	if err == nil || !strings.Contains(err.Error(), "platform linux/arm64") || strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("FetchChildren with linux/arm64 at another digest: %v, want an error reading linux/arm64 alone", err)
	}
}
