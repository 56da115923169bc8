// artifact-check validates the deployment artifacts `rbl compile` writes, with the real
// implementations' own code instead of an Envoy binary, a Docker engine or a cluster:
//
//	artifact-check envoy FILE...   Envoy bootstraps, checked as Envoy checks them at start-up
//	artifact-check compose FILE    a compose file, loaded as Docker Compose v2 loads it
//	                               (compose-go: schema, interpolation, normalisation); the
//	                               resolved project is printed as JSON on stdout
//	artifact-check istio FILE...   Istio DestinationRules and VirtualServices, read strictly
//	                               and validated by Istio's own code (istio.go)
//
// Exit 0: valid; 1: invalid (reasons printed); 2: usage.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	files := os.Args[2:]
	switch os.Args[1] {
	case "envoy":
		os.Exit(checkFiles(files, validateEnvoyFile))
	case "istio":
		os.Exit(checkFiles(files, validateIstioFile))
	case "compose":
		if len(files) != 1 {
			usage()
		}
		os.Exit(checkCompose(files[0]))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: artifact-check envoy FILE... | artifact-check compose FILE | artifact-check istio FILE...")
	os.Exit(2)
}

// checkFiles prints "FILE: ok" or each of its errors; exit 1 if any file has one.
func checkFiles(paths []string, validate func(string) []error) int {
	status := 0
	for _, path := range paths {
		errs := validate(path)
		for _, err := range errs {
			fmt.Printf("%s: %v\n", path, err)
		}
		if len(errs) > 0 {
			status = 1
		} else {
			fmt.Printf("%s: ok\n", path)
		}
	}
	return status
}
