package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Order is one order.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=orders,scope=Namespaced,shortName=ord
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'x'",message="an order may not be called x"
type Order struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what was ordered. Required.
	Spec OrderSpec `json:"spec"`
}

// OrderList is a list of orders.
// +kubebuilder:object:root=true
type OrderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Order `json:"items"`
}

// OrderSpec is an order's content.
type OrderSpec struct {
	Common `json:",inline"`

	// size is how big: Small or Large | never Huge.
	// +optional
	// +kubebuilder:default=Small
	Size Size `json:"size,omitempty"`

	// env is passed on.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Env []corev1.EnvVar `json:"env,omitempty"`

	internal string
}

// Common is inlined into OrderSpec.
type Common struct {
	// lines are the ordered items.
	// +kubebuilder:validation:MinItems=1
	Lines map[string]*Line `json:"lines"`
}

// Line is one item.
type Line struct {
	// sku names the item, e.g. "<shelf>-<n>".
	// +kubebuilder:validation:Pattern=`^[a-z]+-[0-9]+$`
	SKU string `json:"sku"`
}

// Size is how big an order is.
// +kubebuilder:validation:Enum=Small;Large
type Size string

const (
	// SizeSmall fits a bag.
	SizeSmall Size = "Small"
	// SizeLarge needs a van.
	SizeLarge Size = "Large"
)

// Unused is reached from no kind.
type Unused struct {
	A string `json:"a"`
}
