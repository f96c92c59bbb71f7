// Package v1alpha1 is a configuration file.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	shopv1 "github.com/archway-build/archway/hack/apidocs/testdata/apis/shop/v1"
)

const group = "config.example.com"

// GroupVersion is the file's apiVersion.
var GroupVersion = schema.GroupVersion{Group: group, Version: "v1alpha1"}

// ShopConfiguration is the whole file.
type ShopConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// defaultLine is the line an empty order gets.
	DefaultLine shopv1.Line `json:"defaultLine"`
}
