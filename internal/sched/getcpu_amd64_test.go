package sched

func fastKind() int { fastCPUOnce.Do(initFastCPU); return fastCPUKind }
