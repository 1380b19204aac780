// Package rbac embeds the ClusterRoles vmipam ships for its dry-run endpoint (dryrun.yaml):
// vmipam:dryrun:virtualmachines (create virtualmachines, bound per namespace) and
// vmipam:dryrun:clusteripampolicies (create clusteripampolicies, for requests with candidate
// policies) for callers, and vmipam:dryrun:delegator (TokenReviews, SubjectAccessReviews) for
// the controller. The YAML is the deliverable; ClusterRoles lets tests apply exactly it.
package rbac
