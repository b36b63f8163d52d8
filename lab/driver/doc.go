// Package driver is the one mechanism the lab's measurements share
// (issue 10 §2): how configurations are interleaved (Interleave), how CPU
// loads are started, kept across measurements and measured (Loads,
// GoLoad), and how tables are printed (WriteBox). Package lab/scenario
// (the wqlab scenarios) and package lab/wake (`wqlab wake`) both run on
// it, so that a row of one is measured the way a row of the other is.
package driver
