package wq

import (
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
