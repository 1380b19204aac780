package sdn

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// netKey identifies a network as an IPAddress's spec.networkRef names it. Namespace is empty
// for a ClusterNetwork.
type netKey struct {
	Kind, Namespace, Name string
}

// networkOf is the network ip refers to: a ClusterNetwork, or a Network in ip's namespace.
func networkOf(ip *sdnv1.IPAddress) netKey {
	ref := ip.Spec.NetworkRef
	if ref.Kind == sdnv1.KindClusterNetwork {
		return netKey{Kind: sdnv1.KindClusterNetwork, Name: ref.Name}
	}
	return netKey{Kind: sdnv1.KindNetwork, Namespace: ip.Namespace, Name: ref.Name}
}

// poolInfo is what allocation needs to know about a pool.
type poolInfo struct {
	key   poolKey
	space addressSpace
	ttl   time.Duration
}

// resolve follows ip's network to its pool. A missing network or pool is a failure outcome, not
// an error; errors are API errors other than NotFound.
func (s *Simulator) resolve(ctx context.Context, ip *sdnv1.IPAddress) (poolInfo, *outcome, error) {
	key, fail, err := s.poolOf(ctx, networkOf(ip))
	if fail != nil || err != nil {
		return poolInfo{}, fail, err
	}
	return s.loadPool(ctx, key)
}

// poolOf reads network n and returns the key of its pool.
func (s *Simulator) poolOf(ctx context.Context, n netKey) (poolKey, *outcome, error) {
	ref, err := s.networkPool(ctx, n)
	if apierrors.IsNotFound(err) {
		return poolKey{}, failed(ReasonNetworkNotFound, "%s %s not found", n.Kind, n.Name), nil
	}
	if err != nil {
		return poolKey{}, nil, fmt.Errorf("getting %s %s: %w", n.Kind, n.Name, err)
	}
	if ref == nil {
		return poolKey{}, failed(ReasonNoIPAMPool, "%s %s has no IPAM pool", n.Kind, n.Name), nil
	}
	return poolKeyFor(n, ref), nil, nil
}

// networkPool reads network n and returns its pool, nil when it has none.
func (s *Simulator) networkPool(ctx context.Context, n netKey) (*sdnv1.PoolRef, error) {
	if n.Kind == sdnv1.KindClusterNetwork {
		cn := &sdnv1.ClusterNetwork{}
		err := s.Client.Get(ctx, client.ObjectKey{Name: n.Name}, cn)
		return cn.Spec.PoolRef(), err
	}
	nw := &sdnv1.Network{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: n.Name}, nw)
	return nw.Spec.PoolRef(), err
}

// poolKeyFor is the pool ref of network n as a key: an IPAddressPool lives in the network's
// namespace. An empty kind means the usual pool kind of the network's kind.
func poolKeyFor(n netKey, ref *sdnv1.PoolRef) poolKey {
	kind := ref.Kind
	if kind == "" {
		kind = sdnv1.KindIPAddressPool
		if n.Kind == sdnv1.KindClusterNetwork {
			kind = sdnv1.KindClusterIPAddressPool
		}
	}
	if kind == sdnv1.KindClusterIPAddressPool {
		return poolKey{Kind: kind, Name: ref.Name}
	}
	return poolKey{Kind: kind, Namespace: n.Namespace, Name: ref.Name}
}

// loadPool reads and parses the pool of key.
func (s *Simulator) loadPool(ctx context.Context, key poolKey) (poolInfo, *outcome, error) {
	if key.Kind == sdnv1.KindIPAddressPool && key.Namespace == "" {
		return poolInfo{}, failed(ReasonNoIPAMPool, "a ClusterNetwork cannot use IPAddressPool %s", key.Name), nil
	}
	spec, err := s.poolSpec(ctx, key)
	if apierrors.IsNotFound(err) {
		return poolInfo{}, failed(ReasonNoIPAMPool, "%s %s not found", key.Kind, key.Name), nil
	}
	if err != nil {
		return poolInfo{}, nil, fmt.Errorf("getting %s %s: %w", key.Kind, key.Name, err)
	}
	space, err := parseSpace(spec.Pools)
	if err != nil {
		return poolInfo{}, failed(ReasonInvalidPool, "%s %s: %v", key.Kind, key.Name, err), nil
	}
	info := poolInfo{key: key, space: space}
	if spec.LeaseTTL != nil {
		info.ttl = spec.LeaseTTL.Duration
	}
	return info, nil, nil
}

// poolSpec reads the spec of the pool of key.
func (s *Simulator) poolSpec(ctx context.Context, key poolKey) (sdnv1.IPAddressPoolSpec, error) {
	if key.Kind == sdnv1.KindClusterIPAddressPool {
		p := &sdnv1.ClusterIPAddressPool{}
		err := s.Client.Get(ctx, client.ObjectKey{Name: key.Name}, p)
		return p.Spec, err
	}
	p := &sdnv1.IPAddressPool{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, p)
	return p.Spec, err
}

// poolResolver returns a function that maps networks to their pools, reading each network once.
// Networks that cannot be resolved map to ok=false.
func (s *Simulator) poolResolver(ctx context.Context) func(netKey) (poolKey, bool) {
	type answer struct {
		key poolKey
		ok  bool
	}
	seen := map[netKey]answer{}
	return func(n netKey) (poolKey, bool) {
		a, done := seen[n]
		if !done {
			key, fail, err := s.poolOf(ctx, n)
			a = answer{key: key, ok: fail == nil && err == nil}
			seen[n] = a
		}
		return a.key, a.ok
	}
}

// allocatedAddr is ip's address when SDN has allocated one.
func allocatedAddr(ip *sdnv1.IPAddress) (netip.Addr, bool) {
	if ip.Status.Phase != sdnv1.IPAddressPhaseAllocated {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(ip.Status.Address)
	return a, err == nil
}

// ttlResolver returns a function that maps pools to their leaseTTL, reading each pool once; 0
// for a pool that cannot be read.
func (s *Simulator) ttlResolver(ctx context.Context) func(poolKey) time.Duration {
	seen := map[poolKey]time.Duration{}
	return func(key poolKey) time.Duration {
		ttl, done := seen[key]
		if !done {
			info, _, _ := s.loadPool(ctx, key)
			ttl = info.ttl
			seen[key] = ttl
		}
		return ttl
	}
}
