package main

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// validateExample checks an example against its CRD's schema for the
// example's version, as the apiserver would on create: the version must be
// served, the object must pass the OpenAPI schema, and no field may be
// one the schema would prune (a field the apiserver silently drops is a
// mistake in an example). CEL rules (x-kubernetes-validations) are not
// evaluated here.
func validateExample(crd *apiextensionsv1.CustomResourceDefinition, u *unstructured.Unstructured) error {
	version := u.GroupVersionKind().Version
	var schema *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Served && v.Schema != nil {
			schema = v.Schema.OpenAPIV3Schema
		}
	}
	if schema == nil {
		return fmt.Errorf("version %s of %s is not served", version, crd.Name)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(schema, &internal, nil); err != nil {
		return err
	}
	validator, _, err := validation.NewSchemaValidator(&internal)
	if err != nil {
		return err
	}
	obj := runtime.DeepCopyJSON(u.Object)
	if errs := validation.ValidateCustomResource(nil, obj, validator); len(errs) > 0 {
		return errs.ToAggregate()
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return err
	}
	// As the root of a resource: apiVersion, kind and metadata are the
	// apiserver's.
	pruned := pruning.PruneWithOptions(obj, structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if len(pruned) > 0 {
		return errors.New("unknown fields " + strings.Join(pruned, ", "))
	}
	return nil
}
