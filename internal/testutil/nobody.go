// Package testutil holds helpers shared by gowq's tests.
package testutil

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// NobodyUID is the uid and gid the unprivileged children run as.
const NobodyUID = 65534

// NobodyCommand returns a command that runs a copy of the current test
// binary as user nobody (uid and gid 65534, no capabilities) with args
// (e.g. "-test.run=^TestX$") and the extra environment env, from a fresh
// world-accessible temporary directory that is removed when the test ends;
// the directory is also returned (the child's working directory; HOME and
// XDG_CACHE_HOME point there). It skips the test when the process is not
// root, since only root can switch users.
func NobodyCommand(t testing.TB, args []string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a child as user nobody")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gowq-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(self))
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CACHE_HOME="+dir)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: NobodyUID, Gid: NobodyUID}}
	return cmd, dir
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
