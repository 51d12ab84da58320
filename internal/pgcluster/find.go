package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries reports that no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// InstallHint says how to get the server binaries on a Debian-like machine.
const InstallHint = "install them with `apt-get install postgresql` (Debian/Ubuntu) or set PG_BIN to the directory holding initdb and postgres"

// FindBinDir returns the directory holding initdb and postgres: $PG_BIN if
// set, else `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
	if dir := os.Getenv("PG_BIN"); dir != "" {
		if hasServer(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w in PG_BIN=%s: %s", ErrNoBinaries, dir, InstallHint)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); hasServer(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, dir := range dirs {
		if hasServer(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w: %s", ErrNoBinaries, InstallHint)
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// majorOf extracts 15 from /usr/lib/postgresql/15/bin.
func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}
