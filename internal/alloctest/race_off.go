//go:build !race

package alloctest

// RaceEnabled says the binary was built with -race (see race_on.go).
const RaceEnabled = false
