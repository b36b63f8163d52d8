package wq

// CheckThreadHeadroom is checkThreadHeadroom, for the external tests that
// run it under real limits.
var CheckThreadHeadroom = checkThreadHeadroom
