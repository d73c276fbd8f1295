// Command composecheck loads compose files with compose-go, the loader docker compose
// itself uses, and prints the resolved project as JSON for the Python tests to inspect.
//
// Why a Go program: no Docker daemon or compose plugin is needed to tell whether a file
// is one docker compose would accept, with the same interpolation, profile and
// validation rules.
//
// Usage: composecheck [-env-file FILE]... [-profile NAME]... [-workdir DIR] FILE...
// Exit codes: 0 loaded (JSON on stdout), 1 the files do not load (reason on stderr),
// 2 bad usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
)

// repeated collects a flag given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	var envFiles, profiles repeated
	flag.Var(&envFiles, "env-file", "env file to interpolate from (repeatable; default: .env beside the first file)")
	flag.Var(&profiles, "profile", "profile to enable (repeatable; default: COMPOSE_PROFILES from the environment)")
	workdir := flag.String("workdir", "", "project directory (default: the first file's directory)")
	name := flag.String("name", "composecheck", "project name")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: composecheck [-env-file FILE]... [-profile NAME]... FILE...")
		os.Exit(2)
	}
	opts := []cli.ProjectOptionsFn{
		cli.WithName(*name),
		cli.WithEnvFiles(envFiles...),
		// Only the env files count, not this process's environment: the result must not
		// depend on who runs the check.
		cli.WithDotEnv,
		cli.WithDefaultProfiles(profiles...),
		cli.WithResolvedPaths(true),
		cli.WithConsistency(true),
	}
	if *workdir != "" {
		opts = append(opts, cli.WithWorkingDirectory(*workdir))
	}
	options, err := cli.NewProjectOptions(flag.Args(), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	out, err := project.MarshalJSON()
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
	fmt.Println()
}
