package protection

import (
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// actorAuthorized says whether the requesting user is on the list: an
// entry "namespace/name" matches that service account's user name
// (system:serviceaccount:namespace:name) exactly; any other entry matches a
// user name exactly, or as a prefix when it ends in "*".
func actorAuthorized(user string, authorized []string) bool {
	for _, entry := range authorized {
		switch {
		case strings.Contains(entry, "/"):
			ns, name, _ := strings.Cut(entry, "/")
			if user == serviceaccount.MakeUsername(ns, name) {
				return true
			}
		case strings.HasSuffix(entry, "*"):
			if strings.HasPrefix(user, strings.TrimSuffix(entry, "*")) {
				return true
			}
		case user == entry:
			return true
		}
	}
	return false
}

// namespaceAuthorized says whether pods of the namespace may be put on the
// group's nodes: whether any "namespace/serviceaccount" entry is in it.
// Authorization of pods is by namespace, as the design has it: a namespace's
// service accounts are interchangeable to anyone who can create pods there.
func namespaceAuthorized(namespace string, authorized []string) bool {
	for _, entry := range authorized {
		if ns, _, ok := strings.Cut(entry, "/"); ok && ns == namespace {
			return true
		}
	}
	return false
}

// groupAuthorized says whether the requester is in one of the authorized
// groups (matched exactly).
func groupAuthorized(groups, authorized []string) bool {
	return slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(authorized, g) })
}
