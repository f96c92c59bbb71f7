package manifestlist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.podman.io/image/v5/docker/reference"
)

// Untag removes each tag refs name from its registry with the distribution
// API's DELETE /v2/<name>/manifests/<tag>, which removes the tag and leaves
// the manifest, any other tags on it and any manifest list that lists it.
// It never deletes by digest: a reference without a tag, or with a digest,
// is refused.
//
// A tag that is already gone counts as removed. Every other failure
// (a registry that does not allow deleting, credentials it refuses) is
// returned, one error per reference, joined; removing tags is a courtesy to
// the registry, so callers log the error and go on.
func Untag(ctx context.Context, access Access, refs ...string) error {
	var errs []error
	clients := map[string]*registryClient{}
	for _, s := range refs {
		named, err := reference.ParseNormalizedNamed(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("untagging %s: %w", s, err))
			continue
		}
		tagged, ok := named.(reference.NamedTagged)
		if _, digested := named.(reference.Digested); !ok || digested {
			errs = append(errs, fmt.Errorf("untagging %s: not a reference to a tag (untagging never deletes by digest)", s))
			continue
		}
		repo := reference.TrimNamed(tagged)
		c, ok := clients[repo.Name()]
		if !ok {
			if c, err = newRegistryClient(ctx, access, repo); err != nil {
				errs = append(errs, fmt.Errorf("untagging %s: %w", s, err))
				continue
			}
			clients[repo.Name()] = c
		}
		if err := c.untag(ctx, tagged.Tag()); err != nil {
			errs = append(errs, fmt.Errorf("untagging %s: %w", tagged, err))
		}
	}
	return errors.Join(errs...)
}

// untag deletes one tag of c's repository.
func (c *registryClient) untag(ctx context.Context, tag string) error {
	path := "/v2/" + reference.Path(c.repo) + "/manifests/" + tag
	resp, err := c.do(ctx, http.MethodDelete, path, "delete")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusOK, http.StatusNoContent:
		return nil
	case http.StatusNotFound:
		return nil // already gone
	case http.StatusMethodNotAllowed:
		return fmt.Errorf("the registry does not allow deleting tags (%s)%s", resp.Status, registryMessage(resp))
	default:
		return fmt.Errorf("DELETE %s: %s%s", path, resp.Status, registryMessage(resp))
	}
}

// registryMessage is the start of an error body, for messages.
func registryMessage(resp *http.Response) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if msg := strings.TrimSpace(string(body)); msg != "" {
		return ": " + msg
	}
	return ""
}
