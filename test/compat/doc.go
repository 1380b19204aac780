// Package compat checks that vmipam works unchanged when the real VirtualMachine and
// VirtualMachineOperation CRDs of the virtualization platform are installed instead of the
// project's trimmed copies. The CRDs are read from ../shared/upstream beside the checkout
// (see its README); the suite skips, saying so, when that folder is absent.
package compat
