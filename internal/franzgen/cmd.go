// Command franzgen is franz-go's message generator (github.com/twmb/franz-go v1.22.3,
// directory generate/, BSD-licensed: see LICENSE), vendored because it is a main package
// that writes only kmsg's generated.go, with exactq's two targets:
//
//	franzgen wire -defs ../wire/definitions -settable-key TxnShareAcknowledge -o generated.go
//	franzgen decodecost [-wire -defs dir] -o file
//
// wire writes the wire package's messages (the ones kmsg lacks) from definition files in
// franz-go's DSL (generate/README.md in franz-go), with franz-go's own code writers;
// decodecost writes internal/decodecost's walkers, which read a request body as the
// generated ReadFrom does without allocating, for kmsg's requests or the wire package's.
// Both run from `go generate` (see wire/doc.go and internal/decodecost/decodecost.go).
//
// parse.go and gen.go are franz-go's, verbatim; main.go is franz-go's without its main
// function (its go:generate line and the imports only it used). franz-go's main is replaced
// by this file, wire.go and decodecost.go, which are exactq's.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "wire":
		wireMain(os.Args[2:])
	case "decodecost":
		decodecostMain(os.Args[2:])
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: franzgen wire -defs dir [-settable-key Name,...] [-o file]")
	fmt.Fprintln(os.Stderr, "       franzgen decodecost [-defs dir] [-wire] [-o file]")
	os.Exit(2)
}
