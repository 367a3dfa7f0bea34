//go:build !unix

package search

func lowPriority(int) {}
