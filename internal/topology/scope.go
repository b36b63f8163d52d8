package topology

import (
	"errors"
	"fmt"
	"strings"
)

// Scope is a workqueue affinity scope: how the CPUs are partitioned into
// affinity pods for unbound worker pools. It mirrors the kernel's enum
// wq_affn_scope and the names accepted by the workqueue sysfs attribute
// affinity_scope and the boot parameter workqueue.default_affinity_scope.
type Scope int

// The affinity scopes, from the finest to the coarsest partition.
const (
	// ScopeDefault (the zero value, "default") follows the global default
	// scope; the methods of Topology treat it as DefaultScope. A workqueue
	// layer whose default can be changed at run time resolves it first.
	ScopeDefault Scope = iota
	// ScopeCPU puts every CPU in its own pod ("cpu").
	ScopeCPU
	// ScopeSMT groups the SMT siblings of one core ("smt").
	ScopeSMT
	// ScopeCacheShard splits each last-level cache into shards of about
	// the cache shard size in cores, SMT siblings kept together
	// ("cache_shard", the kernel's WQ_AFFN_CACHE_SHARD): see
	// Topology.WithCacheShardSize.
	ScopeCacheShard
	// ScopeCache groups the CPUs that share the last-level cache ("cache").
	ScopeCache
	// ScopeNUMA groups the CPUs of one NUMA node ("numa").
	ScopeNUMA
	// ScopeSystem puts all CPUs in a single pod ("system").
	ScopeSystem

	numScopes = int(ScopeSystem) + 1
)

// DefaultScope is the kernel's default affinity scope, ScopeCacheShard
// (since the series that added it; ScopeCache before).
const DefaultScope = ScopeCacheShard

// ErrUnknownScope is returned, wrapped, by ParseScope for a name that is
// not an affinity scope.
var ErrUnknownScope = errors.New("topology: unknown affinity scope")

var scopeNames = [numScopes]string{"default", "cpu", "smt", "cache_shard", "cache", "numa", "system"}

// String returns the kernel's name of the scope: "default", "cpu", "smt",
// "cache_shard", "cache", "numa" or "system"; "Scope(N)" for an invalid
// value.
func (s Scope) String() string {
	if s.Valid() {
		return scopeNames[s]
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Valid reports whether s is one of the declared scopes.
func (s Scope) Valid() bool { return s >= ScopeDefault && s <= ScopeSystem }

// resolve maps ScopeDefault to DefaultScope.
func (s Scope) resolve() Scope {
	if s == ScopeDefault {
		return DefaultScope
	}
	return s
}

// ParseScope returns the scope named name, as String spells it; surrounding
// white space and case are ignored. It returns an error wrapping
// ErrUnknownScope (and ErrSyntax) for any other name.
func ParseScope(name string) (Scope, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for i, sn := range scopeNames {
		if n == sn {
			return Scope(i), nil
		}
	}
	return ScopeDefault, fmt.Errorf("%w %q (want one of %s): %w", ErrUnknownScope, name,
		strings.Join(scopeNames[:], ", "), ErrSyntax)
}
