// Package relpath is the one path rule of every file cas writes that names
// other files (a training run's config.yaml, an index folder's
// settings.json): a path is stored relative to the folder of the file that
// holds it when it lies under the same tree, else absolute; it is resolved
// against that folder when read. A folder moved or copied as a whole
// therefore keeps working, and nothing depends on the working directory of
// the process that wrote it.
package relpath

import (
	"fmt"
	"path/filepath"
	"strings"
)

// IsURL reports whether p is a URL (scheme://…), which is never a file.
func IsURL(p string) bool { return strings.Contains(p, "://") }

// Abs returns p as an absolute, clean path ("" and URLs unchanged).
func Abs(p string) (string, error) {
	if p == "" || IsURL(p) {
		return p, nil
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("path %s: %w", p, err)
	}
	return a, nil
}

// Store returns the form of target to record in a file whose folder is
// holderDir: relative to holderDir when target lies under root (the tree
// that is moved as a whole; "" means holderDir itself), else absolute.
// Relative targets are taken relative to the working directory. "" and URLs
// are returned unchanged.
func Store(holderDir, root, target string) (string, error) {
	if target == "" || IsURL(target) {
		return target, nil
	}
	t, err := Abs(target)
	if err != nil {
		return "", err
	}
	h, err := Abs(holderDir)
	if err != nil {
		return "", err
	}
	r := h
	if root != "" {
		if r, err = Abs(root); err != nil {
			return "", err
		}
	}
	if !Within(r, t) {
		return t, nil
	}
	rel, err := filepath.Rel(h, t)
	if err != nil {
		return t, nil
	}
	return filepath.ToSlash(rel), nil
}

// Resolve returns the path a recorded p names: absolute paths (and "" and
// URLs) as they are, relative ones joined to holderDir.
func Resolve(holderDir, p string) string {
	if p == "" || IsURL(p) || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(holderDir, filepath.FromSlash(p))
}

// Inside resolves p, recorded in a file of folder dir, and checks that it
// names something inside dir: a folder's own files (its index, offsets,
// vectors) are always stored relative, so an absolute path or one that
// climbs out with ".." is refused, whatever the file says. key names the
// field in errors.
func Inside(dir, key, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s is empty", key)
	}
	if filepath.IsAbs(p) || IsURL(p) {
		return "", fmt.Errorf("%s %q must be a path inside the folder %s", key, p, dir)
	}
	c := filepath.Clean(filepath.FromSlash(p))
	if c == ".." || strings.HasPrefix(c, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s %q leaves the folder %s", key, p, dir)
	}
	return filepath.Join(dir, c), nil
}

// InsideOrAbs resolves p, recorded in a file of folder dir, for a file
// that may live elsewhere (an index folder's corpus or encoder): an absolute
// path is the writer's explicit choice and is kept; a relative one must stay
// inside dir (see Inside).
func InsideOrAbs(dir, key, p string) (string, error) {
	if p != "" && filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return Inside(dir, key, p)
}

// Within reports whether path p lies in (or is) folder dir; both absolute
// and clean.
func Within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel))
}
