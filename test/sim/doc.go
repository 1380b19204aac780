// Package sim holds what the STAND-INS (sdn, virtualization: DESIGN.md §6) share: the cache
// options of a manager they run in, and running such a manager for one test (RunForTest). They
// are not vmipam and never run in a real cluster.
package sim
