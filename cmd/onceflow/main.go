// Command onceflow runs and inspects onceflow workflows; see `onceflow --help`.
package main

import "github.com/onceflow/onceflow/cmd/onceflow/internal/cli"

func main() { cli.Main() }
