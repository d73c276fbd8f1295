// Command re2match answers, for each line on stdin, whether Go's regexp (RE2, the engine
// behind Filebeat's multiline patterns) finds the pattern given as the only argument.
// Lines are JSON strings, one per line; answers are 0 or 1, one per line. The tests use it
// to prove the Python emulation of filebeat.yml's patterns agrees with Go on every line.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: re2match PATTERN < json-lines")
		os.Exit(2)
	}
	pattern, err := regexp.Compile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "re2match:", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		var line string
		if err := json.Unmarshal(in.Bytes(), &line); err != nil {
			fmt.Fprintln(os.Stderr, "re2match:", err)
			os.Exit(2)
		}
		if pattern.MatchString(line) {
			fmt.Fprintln(out, 1)
		} else {
			fmt.Fprintln(out, 0)
		}
	}
}
