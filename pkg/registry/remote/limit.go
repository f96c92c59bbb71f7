package remote

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The largest manifest and config archway reads from a registry: far more
// than any image's, small enough that a registry cannot make a reader hold
// much in memory.
const (
	MaxManifestSize = 4 << 20
	MaxConfigSize   = 8 << 20
)

// AnswerLimit says how far the answer to a GET that first is the request
// of is read: the most bytes, and what the answer is as error messages
// name it ("its manifest", "the registry's tag list page"); a limit of 0
// reads it whole. A redirect is followed with a request of its own, to a
// path of the registry's choosing, so first is the request that began the
// redirects, not the one the answer came to.
type AnswerLimit func(first *http.Request) (limit int64, what string)

// LimitAnswers wraps inner so that the body of an answer to a GET fails to
// be read beyond what limit says, whatever size the registry declares: a
// registry that says an answer is small, or says nothing, and sends
// without end is not read further.
func LimitAnswers(inner http.RoundTripper, limit AnswerLimit) http.RoundTripper {
	return limitAnswers{inner: inner, limit: limit}
}

type limitAnswers struct {
	inner http.RoundTripper
	limit AnswerLimit
}

func (t limitAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet {
		return resp, err
	}
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	limit, what := t.limit(first)
	if limit <= 0 {
		return resp, nil
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, declared: resp.ContentLength, left: limit, limit: limit, what: what}
	return resp, nil
}

// TooLargeError says that an answer has more bytes than its limit.
type TooLargeError struct {
	// What the answer is, as AnswerLimit named it.
	What string
	// Size is the size the registry declared, or -1 when it declared
	// none or less than was sent.
	Size  int64
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size >= 0 {
		return fmt.Sprintf("%s has %d bytes, more than %d", e.What, e.Size, e.Limit)
	}
	return fmt.Sprintf("%s has more than %d bytes", e.What, e.Limit)
}

// limitedBody fails a read once the body's declared size or what was read
// is more than limit.
type limitedBody struct {
	io.ReadCloser
	declared    int64 // -1 when unknown
	left, limit int64
	what        string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.declared > b.limit {
		return 0, &TooLargeError{What: b.what, Size: b.declared, Limit: b.limit}
	}
	if b.left <= 0 {
		// Read one byte more to tell the end from too much.
		var one [1]byte
		if n, _ := io.ReadFull(b.ReadCloser, one[:]); n > 0 {
			return 0, &TooLargeError{What: b.what, Size: -1, Limit: b.limit}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// The endpoints of the distribution API that PathKind tells apart.
const (
	ManifestPath = "manifest" // /v2/<name>/manifests/<reference>
	BlobPath     = "blob"     // /v2/<name>/blobs/<digest>
	TagListPath  = "tags"     // /v2/<name>/tags/list
)

// PathKind says which endpoint of the distribution API path is:
// ManifestPath, BlobPath or TagListPath, or "" for any other. It reads the
// path from its end: a repository name may have components called
// manifests, blobs or tags, but a reference or digest has no slash.
func PathKind(path string) string {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return ""
	}
	if name, ok := strings.CutSuffix(rest, "/tags/list"); ok && name != "" {
		return TagListPath
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return ""
	}
	head, ref := rest[:i], rest[i+1:]
	j := strings.LastIndexByte(head, '/')
	if j <= 0 || ref == "" {
		return ""
	}
	switch head[j+1:] {
	case "manifests":
		return ManifestPath
	case "blobs":
		return BlobPath
	}
	return ""
}
