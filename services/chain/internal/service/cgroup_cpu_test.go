package service

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupCPUReadsEitherVersion(t *testing.T) {
	v2 := t.TempDir()
	os.WriteFile(filepath.Join(v2, "cpu.stat"), []byte("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"), 0o644)
	if got, err := CgroupCPU(v2); err != nil || got != 2.5 {
		t.Fatalf("v2: %v %v", got, err)
	}
	v1 := t.TempDir()
	os.Mkdir(filepath.Join(v1, "cpu,cpuacct"), 0o755)
	os.WriteFile(filepath.Join(v1, "cpu,cpuacct", "cpuacct.usage"), []byte("1250000000\n"), 0o644)
	if got, err := CgroupCPU(v1); err != nil || got != 1.25 {
		t.Fatalf("v1: %v %v", got, err)
	}
	if _, err := CgroupCPU(t.TempDir()); err == nil {
		t.Fatal("no accounting: no error")
	}
}

func TestStatsReportTheCgroupsCPUOnlyWhenAsked(t *testing.T) {
	s := newService(t, leaf)
	if stats(t, s).CPUSeconds.Cgroup != nil {
		t.Fatal("reported a cgroup's CPU without being asked")
	}
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "cpu.stat"), []byte("usage_usec 7000000\n"), 0o644)
	s.AccountCgroup(root)
	if cgroup := stats(t, s).CPUSeconds.Cgroup; cgroup == nil || *cgroup != 7 {
		t.Fatalf("cgroup CPU: %v", cgroup)
	}
}
