package erofs_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gowq/wq/lab/erofs"
)

// Build a corpus from a directory and decompress every cluster, as the
// scenario's decompression work does one cluster at a time.
func Example() {
	dir, err := os.MkdirTemp("", "erofs-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	text := bytes.Repeat([]byte("package main\n\nfunc main() {}\n"), 2000) // 58000 bytes
	if err := os.WriteFile(filepath.Join(dir, "main.go"), text, 0o644); err != nil {
		log.Fatal(err)
	}

	c, err := erofs.Prepare(dir, 0, 0) // 16 KiB clusters
	if err != nil {
		log.Fatal(err)
	}
	dst := make([]byte, c.ClusterSize())
	var total int
	for i := 0; i < c.Len(); i++ {
		n, err := c.Decompress(i, dst)
		if err != nil {
			log.Fatal(err)
		}
		total += n
	}
	fmt.Println(c.Len(), c.RawBytes(), total, c.Ratio() > 10)
	// Output: 4 58000 58000 true
}
