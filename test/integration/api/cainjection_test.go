package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The annotations by which an issuer's injector fills a caBundle.
const (
	certManagerInjectCA = "cert-manager.io/inject-ca-from"
	serviceCAInjectCA   = "service.beta.openshift.io/inject-cabundle"
	serviceCASecret     = "service.beta.openshift.io/serving-cert-secret-name"
)

// checkCAInjection says which webhook configuration or APIService of an
// install would be left with no caBundle, or with two writers of it. Each
// one calls a Service; the Deployment behind it manages its certificate:
//   - --cert-management=internal: archway's own cert writer injects the CA
//     (it names the Service in --webhook-service), so no injector annotation
//     may be there to fight it;
//   - --cert-management=external with cert-manager: the object carries
//     cert-manager.io/inject-ca-from naming a Certificate of the install
//     that writes the Secret the Deployment mounts;
//   - --cert-management=external on OpenShift: the object carries
//     service.beta.openshift.io/inject-cabundle "true" and the Service has
//     the service CA write the mounted Secret.
func checkCAInjection(built []byte) error {
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(built), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	find := func(kind, ns, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
				return o
			}
		}
		return nil
	}
	// The Deployment whose pods a Service selects.
	behind := func(svc *unstructured.Unstructured) *unstructured.Unstructured {
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		for _, o := range objs {
			if o.GetKind() != "Deployment" || o.GetNamespace() != svc.GetNamespace() || len(sel) == 0 {
				continue
			}
			labels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			if containsAll(labels, sel) {
				return o
			}
		}
		return nil
	}
	checked := 0
	for _, o := range objs {
		var services [][2]string // namespace, name
		switch o.GetKind() {
		case "APIService":
			ns, _, _ := unstructured.NestedString(o.Object, "spec", "service", "namespace")
			name, _, _ := unstructured.NestedString(o.Object, "spec", "service", "name")
			services = append(services, [2]string{ns, name})
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				m, _ := h.(map[string]any)
				ns, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
				name, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
				if name != "" && !slices.Contains(services, [2]string{ns, name}) {
					services = append(services, [2]string{ns, name})
				}
			}
		default:
			continue
		}
		what := o.GetKind() + " " + o.GetName()
		if len(services) != 1 {
			return fmt.Errorf("%s calls %d Services (%v): one CA cannot serve them", what, len(services), services)
		}
		svc := find("Service", services[0][0], services[0][1])
		if svc == nil {
			return fmt.Errorf("%s calls the Service %s/%s, which the install does not have", what, services[0][0], services[0][1])
		}
		dep := behind(svc)
		if dep == nil {
			return fmt.Errorf("%s calls the Service %s, which selects no Deployment of the install", what, svc.GetName())
		}
		flags, mounted := certFlags(dep)
		ann := o.GetAnnotations()
		switch flags["--cert-management"] {
		case "internal":
			if flags["--webhook-service"] != svc.GetName() {
				return fmt.Errorf("%s: deployment %s writes the certificate of the Service %q, not of %s, which it calls", what, dep.GetName(), flags["--webhook-service"], svc.GetName())
			}
			for _, a := range []string{certManagerInjectCA, serviceCAInjectCA} {
				if _, ok := ann[a]; ok {
					return fmt.Errorf("%s has %s while deployment %s injects its CA itself (--cert-management=internal): two writers of caBundle", what, a, dep.GetName())
				}
			}
		case "external":
			from, byCertManager := ann[certManagerInjectCA]
			byServiceCA := ann[serviceCAInjectCA] == "true"
			switch {
			case byCertManager && byServiceCA:
				return fmt.Errorf("%s has both %s and %s: two writers of caBundle", what, certManagerInjectCA, serviceCAInjectCA)
			case byCertManager:
				ns, name, _ := strings.Cut(from, "/")
				cert := find("Certificate", ns, name)
				if cert == nil {
					return fmt.Errorf("%s: %s=%q names no Certificate of the install", what, certManagerInjectCA, from)
				}
				if secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); secret != mounted {
					return fmt.Errorf("%s: Certificate %s writes the Secret %q, deployment %s serves with %q", what, from, secret, dep.GetName(), mounted)
				}
				dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
				if host := svc.GetName() + "." + svc.GetNamespace() + ".svc"; !slices.Contains(dns, host) {
					return fmt.Errorf("%s: Certificate %s does not name %s, which the apiserver calls", what, from, host)
				}
			case byServiceCA:
				if secret := svc.GetAnnotations()[serviceCASecret]; secret != mounted {
					return fmt.Errorf("%s: the Service %s has the service CA write %q (%s), deployment %s serves with %q", what, svc.GetName(), secret, serviceCASecret, dep.GetName(), mounted)
				}
			default:
				return fmt.Errorf("%s: deployment %s serves a certificate an issuer makes (--cert-management=external) and nothing injects its CA: annotate it with %s (cert-manager) or %s: \"true\" (OpenShift)", what, dep.GetName(), certManagerInjectCA, serviceCAInjectCA)
			}
		default:
			return fmt.Errorf("%s: deployment %s serves it without --cert-management", what, dep.GetName())
		}
		checked++
	}
	if checked == 0 {
		return errors.New("no webhook configuration or APIService in the install")
	}
	return nil
}

// certFlags are a Deployment's first container's --flag=value arguments
// and the Secret it mounts, if any.
func certFlags(dep *unstructured.Unstructured) (map[string]string, string) {
	flags := map[string]string{}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if len(containers) > 0 {
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		for _, a := range args {
			if k, v, ok := strings.Cut(a, "="); ok {
				flags[k] = v
			}
		}
	}
	var mounted string
	volumes, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
	for _, v := range volumes {
		if s, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); ok {
			mounted = s
		}
	}
	return flags, mounted
}

func containsAll(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
