// Package rbac embeds the ClusterRoles vmipam ships for its dry-run API (dryrun.yaml):
// vmipam:dryrun:evaluator (create evaluations, bound per namespace and aggregated into the
// built-in admin and edit roles) and vmipam:dryrun:policy-evaluator (the custom verb evaluate
// on clusteripampolicies, for Evaluations with candidate policies). The YAML is the
// deliverable; ClusterRoles lets tests apply exactly it.
package rbac
