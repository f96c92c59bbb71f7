package registry

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/docker/config"
)

// WithRepositoryAuth returns base's credentials with from's credential for
// repository added for that repository alone: a repository key is more
// specific than a registry's, so containers/image sends it there and
// nowhere else. A build that pulls with one set of credentials reaches a
// repository that needs others this way (its layer cache, an incremental
// build's previous image, both written with the push secret). The result
// is a new file in dir, or base itself when from is base or holds no
// credential for repository (anonymous: base's credentials do).
func WithRepositoryAuth(base AuthFile, repository reference.Named, from AuthFile, dir string) (AuthFile, error) {
	if from == base {
		return base, nil
	}
	cred, err := config.GetCredentialsForRef(Access{AuthFile: from}.SystemContext(""), repository)
	if err != nil {
		return AuthFile{}, fmt.Errorf("credentials for %s: %w", repository.Name(), err)
	}
	entry := map[string]string{}
	switch {
	case cred.IdentityToken != "":
		entry["identitytoken"] = cred.IdentityToken
	case cred.Username != "" || cred.Password != "":
		entry["auth"] = base64.StdEncoding.EncodeToString([]byte(cred.Username + ":" + cred.Password))
	default:
		return base, nil
	}
	top := map[string]json.RawMessage{}
	auths := map[string]json.RawMessage{}
	if base.Path != "" {
		data, err := os.ReadFile(base.Path)
		if err != nil {
			return AuthFile{}, err
		}
		if base.Legacy {
			// The legacy format is the auths map alone.
			err = json.Unmarshal(data, &auths)
		} else if err = json.Unmarshal(data, &top); err == nil && top["auths"] != nil {
			err = json.Unmarshal(top["auths"], &auths)
		}
		if err != nil {
			return AuthFile{}, fmt.Errorf("docker config %s: %w", base.Path, err)
		}
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		return AuthFile{}, err
	}
	auths[repository.Name()] = raw
	if top["auths"], err = json.Marshal(auths); err != nil {
		return AuthFile{}, err
	}
	data, err := json.Marshal(top)
	if err != nil {
		return AuthFile{}, err
	}
	sum := sha256.Sum256(data)
	path := filepath.Join(dir, "auth-"+hex.EncodeToString(sum[:6])+".json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return AuthFile{}, err
	}
	return AuthFile{Path: path}, nil
}
