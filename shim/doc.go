// Package shim is the Swift task service: it wraps containerd's runc task
// service, forwards every call unchanged except Create (and Delete), and at
// Create edits the bundle's OCI spec with the inject chain before runc runs.
package shim
