package wq

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/gowq/wq/internal/topology"
)

// DefaultCacheShardSize is the default of the cache_shard_size global:
// the kernel's wq_cache_shard_size, 8 cores.
const DefaultCacheShardSize = topology.DefaultCacheShardSize

// cacheShardSize is the cache_shard_size global (cores); every topology
// snapshot gowq reads is cut with it (switchSource.Read).
var cacheShardSize atomic.Int32

func init() { cacheShardSize.Store(DefaultCacheShardSize) }

// CacheShardSize returns the cache_shard_size global: the number of
// cores, each with its SMT siblings, that a cache_shard pod holds about
// (the kernel's workqueue.cache_shard_size). Never blocks.
func CacheShardSize() int { return int(cacheShardSize.Load()) }

// SetCacheShardSize sets the cache_shard_size global and rebuilds the
// pools of the unbound queues whose scope is cache_shard (also through
// "default"), as a topology change does: each last-level cache is split
// into round(cores / n) shards, at least one, of as even a number of
// cores as possible, siblings kept together (the kernel's
// WQ_AFFN_CACHE_SHARD; it takes the size only at boot, gowq at any
// time). It returns ErrInvalidArgument for n outside
// 1..topology.MaxCacheShardSize (4096), and for a size whose pods the
// workers of a live strict queue could not be pinned to (probed as by
// SetAffinityScope); nothing changes then. It blocks while the pools are
// rebuilt. Safe from any goroutine.
func SetCacheShardSize(n int) error {
	if n < 1 || n > topology.MaxCacheShardSize {
		return fmt.Errorf("%w: cache_shard_size %d (want 1..%d)", ErrInvalidArgument, n, topology.MaxCacheShardSize)
	}
	attrMu.Lock()
	defer attrMu.Unlock()
	if n == CacheShardSize() {
		return nil
	}
	nt, err := currentTopology().WithCacheShardSize(n)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if err := checkQueues(liveQueues(), nt, unboundMask.Load(), nil); err != nil {
		return fmt.Errorf("cache_shard_size %d: %w", n, err)
	}
	cacheShardSize.Store(int32(n))
	// Every snapshot read from now on carries the new pods; take one now,
	// so that the pools are rebuilt before this returns. If the topology
	// cannot be read, the next successful rescan applies the size.
	_ = Rescan()
	return nil
}

// withShardSize cuts t's cache_shard pods with the cache_shard_size
// global.
func withShardSize(t *topology.Topology) *topology.Topology {
	if t == nil {
		return nil
	}
	if nt, err := t.WithCacheShardSize(CacheShardSize()); err == nil {
		return nt
	}
	return t
}

// cacheShardAttr formats the cache_shard_size global for GlobalAttr.
func cacheShardAttr() string { return strconv.Itoa(CacheShardSize()) }
