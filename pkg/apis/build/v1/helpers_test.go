package v1_test

import (
	"errors"

	sigsjson "sigs.k8s.io/json"
)

// strictUnmarshal decodes data into v as the apiserver's strict decoding
// does: field names are case-sensitive, and unknown or duplicate fields are
// errors.
func strictUnmarshal(data []byte, v any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}
