// Package v1 is a test API.
//
// # Orders
//
// Orders are kept.
//
// +groupName=shop.example.com
package v1
