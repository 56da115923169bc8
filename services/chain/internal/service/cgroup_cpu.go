package service

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CgroupCPU reads the CPU time of the cgroup whose root a container (or pod) sees at root: the
// accounting its engine keeps for it (docker stats, the kubelet's), which a replica alone in its
// container shares with nothing else. cgroup v2 (cpu.stat's usage_usec) or v1 (cpuacct.usage).
func CgroupCPU(root string) (float64, error) {
	if usec, err := statField(filepath.Join(root, "cpu.stat"), "usage_usec"); err == nil {
		return float64(usec) / 1e6, nil
	}
	for _, controller := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		data, err := os.ReadFile(filepath.Join(root, controller, "cpuacct.usage"))
		if err != nil {
			continue
		}
		ns, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return 0, err
		}
		return float64(ns) / 1e9, nil
	}
	return 0, errors.New("no cpu.stat (cgroup v2) or cpuacct.usage (cgroup v1) under " + root)
}

func statField(path, name string) (uint64, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	lines := bufio.NewScanner(file)
	for lines.Scan() {
		key, value, found := strings.Cut(lines.Text(), " ")
		if found && key == name {
			return strconv.ParseUint(strings.TrimSpace(value), 10, 64)
		}
	}
	return 0, errors.New(path + " has no " + name)
}

// AccountCgroup makes GET /rbl/stats report its cgroup's CPU time (CgroupCPU(root)) beside its own.
func (s *Service) AccountCgroup(root string) { s.stats.cgroupRoot = root }
