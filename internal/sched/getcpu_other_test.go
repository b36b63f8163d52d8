//go:build !amd64

package sched

func fastKind() int { return 0 }
