// Package crdschema applies to a decoded object what the API server applies from a CRD's
// structural schema before validation: nulls in fields that are not nullable are dropped and
// the schema's defaults are filled in. Every decoder of our manifests outside the API server
// (the dry run, ipamctl, policies.Decode) goes through it, so that the same file means the
// same object offline and once installed; the defaults come from the CRDs themselves, never
// from a hand-kept copy.
package crdschema
