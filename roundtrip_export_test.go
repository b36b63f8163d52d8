package wq

// ParkHandOffs returns how many times a worker handed its P back to the
// runtime before parking (park.go).
func ParkHandOffs() uint64 { return parkHandOffs.Load() }
