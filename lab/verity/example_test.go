package verity_test

import (
	"fmt"
	"log"
	"os"

	"github.com/gowq/wq/lab/verity"
)

// A reader reads random blocks and verifies each against the hash tree. In
// the wqlab scenario the Verify call runs on a workqueue and the reader
// waits for it.
func Example() {
	dir, err := os.MkdirTemp("", "verity-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	img, err := verity.Prepare(dir, 1<<20) // 1 MiB: 256 blocks, 2 hash levels
	if err != nil {
		log.Fatal(err)
	}
	r, err := img.OpenReader() // O_DIRECT where the file system allows it
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	buf := verity.AlignedBuffer(verity.BlockSize)
	verified := 0
	for _, idx := range []int64{7, 200, 0, 255} {
		if err := r.ReadBlock(idx, buf); err != nil {
			log.Fatal(err)
		}
		if err := img.Verify(idx, buf); err != nil {
			log.Fatal(err)
		}
		verified++
	}
	buf[100] ^= 1 // a flipped bit in block 255
	err = img.Verify(255, buf)
	fmt.Println(img.Blocks(), img.Levels(), verified, err)
	// Output: 256 2 4 verity: block does not match the hash tree: data block 255, hash level 0
}
