// Package crds gives tests, the sandbox and envtest the CRDs a test cluster needs: vmipam's
// own and the trimmed third-party ones, which live in internal/thirdpartycrds (the dry run
// reads them too, and production code must not import a test package).
package crds
