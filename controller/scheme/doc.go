// Package scheme is the one runtime.Scheme of vmipam: the kinds the controller reads and
// writes — core, ClusterIPAMPolicy, SDN and virtualization. The controller's manager, the
// dry-run engine and ipamctl all build it with New. It is a package of its own so that
// ipamctl gets the scheme without linking the controller's manager and servers.
package scheme
