package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

// checkCompose loads a compose file the way `docker compose config` does, with an empty
// environment so that the output depends only on the file, and prints the resolved project.
func checkCompose(path string) int {
	abs, err := filepath.Abs(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	options, err := cli.NewProjectOptions([]string{abs},
		cli.WithWorkingDirectory(filepath.Dir(abs)),
		cli.WithEnv([]string{}),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(false),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 1
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 1
	}
	out, err := project.MarshalJSON()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 1
	}
	fmt.Println(string(out))
	return 0
}
