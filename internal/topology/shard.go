package topology

import "fmt"

// DefaultCacheShardSize is the kernel's default wq_cache_shard_size: the
// target number of cores (each with its SMT siblings) of a cache_shard pod.
const DefaultCacheShardSize = 8

// MaxCacheShardSize bounds WithCacheShardSize (more cores than any LLC has
// makes every LLC one shard, as ScopeCache).
const MaxCacheShardSize = 4096

// ErrCacheShardSize is returned, wrapped, for a cache shard size outside
// 1..MaxCacheShardSize.
var ErrCacheShardSize = fmt.Errorf("topology: cache shard size out of range (want 1..%d)", MaxCacheShardSize)

// CacheShardSize returns the shard size, in cores, that t's cache_shard
// pods were computed with.
func (t *Topology) CacheShardSize() int { return t.shardSize }

// WithCacheShardSize returns a Topology equal to t except for its
// cache_shard pods, computed for shards of about n cores: t itself when n
// is already its size. A size outside 1..MaxCacheShardSize returns an
// error wrapping ErrCacheShardSize and a nil Topology. It does not block.
func (t *Topology) WithCacheShardSize(n int) (*Topology, error) {
	if n < 1 || n > MaxCacheShardSize {
		return nil, fmt.Errorf("%w: %d", ErrCacheShardSize, n)
	}
	if n == t.shardSize {
		return t, nil
	}
	c := *t
	c.shardSize = n
	c.computeShards()
	return &c, nil
}

// computeShards fills the ScopeCacheShard pods from the SMT and cache
// pods, as the kernel's workqueue_init_topology does for
// WQ_AFFN_CACHE_SHARD: each LLC pod's cores (SMT groups, in the order of
// their first CPU) are split into round(cores / shardSize) shards, at
// least one, spread as evenly as possible (the first cores % shards
// shards take one core more), so that a shard holds about shardSize cores
// with all their siblings. An LLC of fewer cores than half the size is one
// shard; 36 cores at 8 give 8+7+7+7+7, 44 give 8+8+7+7+7+7.
func (t *Topology) computeShards() {
	n := len(t.podIdx[ScopeCache])
	type shardKey struct{ llc, shard int }
	// shardOfCore maps an SMT pod index to its shard within its LLC.
	shardOfCore := map[int32]int{}
	for _, llc := range t.pods[ScopeCache] {
		var cores []int32
		seen := map[int32]bool{}
		for c := range llc.All() {
			if k := t.podIdx[ScopeSMT][c]; !seen[k] {
				seen[k] = true
				cores = append(cores, k)
			}
		}
		shards := max(1, (len(cores)+t.shardSize/2)/t.shardSize)
		per, large := len(cores)/shards, len(cores)%shards
		s, inShard := 0, 0
		for _, k := range cores {
			size := per
			if s < large {
				size++
			}
			if inShard == size {
				s, inShard = s+1, 0
			}
			shardOfCore[k] = s
			inShard++
		}
	}
	pods, idx := groupPods(t.Online, n, func(c int) shardKey {
		return shardKey{int(t.podIdx[ScopeCache][c]), shardOfCore[t.podIdx[ScopeSMT][c]]}
	})
	t.pods[ScopeCacheShard], t.podIdx[ScopeCacheShard] = pods, idx
}
