package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
)

// exitError is an error with the process exit status main uses for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the exit status of a command's error: 0 for none, the
// carried status of an exitError (130/143 for a run stopped by
// SIGINT/SIGTERM), else 1.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// interruptible is the context of a long command (train, demo, ablate,
// index build): cancelled by the first SIGINT or SIGTERM, which it
// remembers so that the command exits 128 + the signal's number (130 for
// Ctrl-C, 143 for a scheduler's SIGTERM), as shells and cluster schedulers
// expect of a run that did not finish. A second signal after stop, or once
// the command has returned, gets the default action.
type interruptible struct {
	ctx  context.Context
	stop func()
	sig  atomic.Value // syscall.Signal
}

func newInterruptible(parent context.Context) *interruptible {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	in := &interruptible{ctx: ctx}
	go func() {
		select {
		case s := <-ch:
			if ss, ok := s.(syscall.Signal); ok {
				in.sig.Store(ss)
			}
			cancel()
			signal.Stop(ch) // a second Ctrl-C kills at once
		case <-done:
		}
	}()
	var once atomic.Bool
	in.stop = func() {
		if once.CompareAndSwap(false, true) {
			signal.Stop(ch)
			close(done)
			cancel()
		}
	}
	return in
}

// signal returns the signal that cancelled the context, if any.
func (in *interruptible) signal() (syscall.Signal, bool) {
	s, ok := in.sig.Load().(syscall.Signal)
	return s, ok
}

// interrupted turns the error of a command stopped by a signal into an
// exitError with status 128 + signal that tells how to continue
// (resume is the command line, "" when nothing can be resumed); other
// errors, and errors when no signal arrived, are returned as they are.
func (in *interruptible) interrupted(err error, what, resume string) error {
	s, ok := in.signal()
	if !ok {
		return err
	}
	msg := fmt.Sprintf("%s interrupted by %s", what, signalName(s))
	if resume != "" {
		msg += "; what was done is saved. Continue with: " + resume
	}
	return &exitError{code: 128 + int(s), err: errors.New(msg)}
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// sameCommand is this process's command line, quoted for a POSIX shell:
// what continues a run that resumes by being run again.
func sameCommand() string {
	return shellJoin(os.Args)
}

func shellJoin(args []string) string {
	out := ""
	for i, a := range args {
		if i > 0 {
			out += " "
		}
		out += shellQuote(a)
	}
	return out
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
