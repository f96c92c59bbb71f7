// Package docscheck holds tests that keep the hand-written reference pages
// of docs/ in step with the code: a name the code serves that its page
// does not list fails the unit tests.
package docscheck
