// Package build has object builders with functional options, so that a test sets up a VM,
// network, pool or IPAddress in one line. Builders only build; they never talk to a cluster.
package build
