package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// curlShimEnv makes the test binary act as the small part of curl that the
// README uses (curl [-s] [--retry N] [--retry-connrefused] [--retry-delay S]
// URL [-d BODY]), so that TestReadmeCommands runs where curl is not
// installed.
const curlShimEnv = "CAS_TEST_CURL_SHIM"

func TestMain(m *testing.M) {
	if os.Getenv(curlShimEnv) == "1" {
		os.Exit(curlShim(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func curlShim(args []string) int {
	var url, body string
	retries, delay := 0, time.Second
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "-s", "--silent", "--retry-connrefused":
		case "-d", "--data":
			i++
			body = args[i]
		case "--retry":
			i++
			retries, _ = strconv.Atoi(args[i])
		case "--retry-delay":
			i++
			s, _ := strconv.Atoi(args[i])
			delay = time.Duration(s) * time.Second
		default:
			url = a
		}
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	for attempt := 0; ; attempt++ {
		var resp *http.Response
		var err error
		if body != "" {
			resp, err = http.Post(url, "application/x-www-form-urlencoded", strings.NewReader(body))
		} else {
			resp, err = http.Get(url)
		}
		if err != nil {
			if attempt < retries {
				time.Sleep(delay)
				continue
			}
			fmt.Fprintln(os.Stderr, "curl:", err)
			return 7
		}
		defer resp.Body.Close()
		if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
			return 23
		}
		return 0
	}
}

// curlOnPath returns a PATH entry that provides curl: nothing when it is
// installed, else a folder with a shim that runs this test binary as curl.
func curlOnPath(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("curl"); err == nil {
		return ""
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\n" + curlShimEnv + "=1 exec " + strconv.Quote(self) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "curl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
