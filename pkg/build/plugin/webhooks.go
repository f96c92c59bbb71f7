package plugin

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// webhookTypes are the webhook trigger types, as their URLs end.
var webhookTypes = []string{"github", "gitlab", "bitbucket", "generic"}

// secretPlaceholder stands for a webhook's secret in the URLs printed, as
// oc describe bc prints them: the secret is in a Secret (or the
// BuildConfig), for those allowed to read it.
const secretPlaceholder = "<secret>"

// endpointPlaceholder stands for the endpoint when none is known.
const endpointPlaceholder = "<build endpoint>"

// webhook is one webhook trigger of a BuildConfig.
type webhook struct {
	typ      string
	url      string
	allowEnv bool // generic only
}

// webhooksOf lists bc's webhook triggers with their URLs at base (the
// endpoint serving them), in the order of bc's triggers.
func webhooksOf(bc *buildv1.BuildConfig, base string) []webhook {
	var out []webhook
	for _, t := range bc.Spec.Triggers {
		var typ string
		var trig *buildv1.WebHookTrigger
		switch t.Type {
		case buildv1.GitHubWebHookBuildTriggerType:
			typ, trig = "github", t.GitHubWebHook
		case buildv1.GitLabWebHookBuildTriggerType:
			typ, trig = "gitlab", t.GitLabWebHook
		case buildv1.BitbucketWebHookBuildTriggerType:
			typ, trig = "bitbucket", t.BitbucketWebHook
		case buildv1.GenericWebHookBuildTriggerType:
			typ, trig = "generic", t.GenericWebHook
		default:
			continue
		}
		if trig == nil {
			continue
		}
		u := strings.TrimSuffix(base, "/") + "/apis/build.openshift.io/v1/namespaces/" + url.PathEscape(bc.Namespace) +
			"/buildconfigs/" + url.PathEscape(bc.Name) + "/webhooks/" + secretPlaceholder + "/" + typ
		out = append(out, webhook{typ: typ, url: u, allowEnv: trig.AllowEnv})
	}
	return out
}

// webhookBase is the endpoint webhook URLs start with: --build-endpoint,
// else $ARCHWAY_BUILD_ENDPOINT, else a placeholder.
func webhookBase(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(EndpointEnv); env != "" {
		return env
	}
	return endpointPlaceholder
}

// printWebhooks prints the BuildConfig's webhook URLs (--list-webhooks),
// as oc start-build --list-webhooks: the type first when listing all.
func (so *startOptions) printWebhooks(ctx context.Context, c client.Client, o *env, ns, name string) error {
	bc, err := getBuildConfig(ctx, c, ns, name)
	if err != nil {
		return err
	}
	hooks := webhooksOf(bc, webhookBase(so.endpoint.url))
	n := 0
	for _, h := range hooks {
		switch so.listWebhooks {
		case "all":
			_, _ = fmt.Fprintf(o.streams.Out, "%s %s\n", h.typ, h.url)
		case h.typ:
			_, _ = fmt.Fprintln(o.streams.Out, h.url)
		default:
			continue
		}
		n++
	}
	if n == 0 && so.listWebhooks == "all" {
		return fmt.Errorf("buildconfig %s has no webhook trigger", name)
	}
	if n == 0 {
		return fmt.Errorf("buildconfig %s has no %s webhook trigger", name, so.listWebhooks)
	}
	return nil
}
