package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// cpuProfile is the root command's --cpuprofile: a CPU profile of the
// whole command written to a file (go tool pprof -top cas FILE reads it),
// started before the command runs and stopped when it returns, on success,
// error or interruption alike.
type cpuProfile struct {
	path string
	f    *os.File
}

// attach adds --cpuprofile to root, starting the profile in root's
// persistent pre-run (which every subcommand inherits).
func (p *cpuProfile) attach(root *cobra.Command) {
	root.PersistentFlags().StringVar(&p.path, "cpuprofile", "", "write a CPU profile of the command to this file (read it with: go tool pprof -top cas FILE)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.start() }
}

func (p *cpuProfile) start() error {
	if p.path == "" {
		return nil
	}
	f, err := os.Create(p.path)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile %s: %w", p.path, err)
	}
	p.f = f
	return nil
}

// stop ends a running profile and closes its file.
func (p *cpuProfile) stop() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return fmt.Errorf("--cpuprofile %s: %w", p.path, err)
	}
	return nil
}
