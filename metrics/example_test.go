package metrics_test

import (
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gowq/wq"
	"github.com/gowq/wq/metrics"
)

// Example_readmeMetrics is the README's metrics example (README.md shows
// its body; TestReadmeGoBlocksCompile in the root package keeps the two
// equal). It runs, and prints nothing.
func Example_readmeMetrics() {
	q, err := wq.Alloc("verity", wq.Unbound, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Destroy()

	c, err := metrics.NewCollector(metrics.Options{}) // every live queue and pool, gowq_* names
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry() // or prometheus.MustRegister(c) on the default one
	reg.MustRegister(c)
	// Serve reg with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) on /metrics.
	if _, err := reg.Gather(); err != nil {
		log.Fatal(err)
	}
	// Output:
}
