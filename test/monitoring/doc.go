// Package monitoring holds the envtest suite of what an on-call engineer relies on: the
// metrics endpoint served as in production (--metrics-secure: HTTPS, authenticated and
// authorized by the API server), scraped with ServiceAccount tokens with and without the
// metrics-reader ClusterRole of deploy/monitoring, and the state gauges checked against the
// VMs the suite creates. It runs its own control plane and one vmipam manager, so that the
// process-wide gauges count this suite's VMs only.
package monitoring
