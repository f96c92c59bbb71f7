package plugin

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
)

// webhookTypes are the webhook trigger types, as their URLs end.
var webhookTypes = []string{"github", "gitlab", "bitbucket", "generic"}

// secretPlaceholder stands for a webhook's secret in the URLs printed, as
// oc describe bc prints them: the secret is in a Secret (or the
// BuildConfig), for those allowed to read it.
const secretPlaceholder = "<secret>"

// webhook is one webhook trigger of a BuildConfig.
type webhook struct {
	typ      string
	url      string
	allowEnv bool // generic only
}

// webhookBase is where webhook URLs start: the server serving them and the
// path prefix there.
type webhookBase struct {
	server, prefix string
}

// webhooksOf lists bc's webhook triggers with their URLs at base, in the
// order of bc's triggers.
func webhooksOf(bc *buildv1.BuildConfig, base webhookBase) []webhook {
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
		u := strings.TrimSuffix(base.server, "/") + paths.Webhook(base.prefix, bc.Namespace, bc.Name, secretPlaceholder, typ)
		out = append(out, webhook{typ: typ, url: u, allowEnv: trig.AllowEnv})
	}
	return out
}

// webhookBase is where webhook URLs start: build-triggers' Service
// (--build-endpoint, else $ARCHWAY_BUILD_ENDPOINT) with OpenShift's path,
// else the cluster's API address (the kubeconfig's server) with the
// aggregated API's path, which the apiserver passes to build-triggers.
func (o *env) webhookBase(flag string) (webhookBase, error) {
	ep, direct, err := endpoint{url: flag}.resolve()
	if err != nil {
		return webhookBase{}, err
	}
	if direct {
		return webhookBase{server: ep.url, prefix: paths.OpenShiftPrefix}, nil
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return webhookBase{}, err
	}
	server, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return webhookBase{}, err
	}
	return webhookBase{server: server.String(), prefix: paths.AggregatedPrefix}, nil
}

// printWebhooks prints the BuildConfig's webhook URLs (--list-webhooks),
// as oc start-build --list-webhooks: the type first when listing all.
func (so *startOptions) printWebhooks(ctx context.Context, c client.Client, o *env, ns, name string) error {
	bc, err := getBuildConfig(ctx, c, ns, name)
	if err != nil {
		return err
	}
	base, err := o.webhookBase(so.endpoint.url)
	if err != nil {
		return err
	}
	hooks := webhooksOf(bc, base)
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
