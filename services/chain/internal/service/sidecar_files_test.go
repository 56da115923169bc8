package service

import (
	"os"
	"path/filepath"
	"testing"
)

const leaf = `{"service": "back", "replica": 0, "work": {"kind": "none"}}`

func TestSidecarFilesAreReplacedWithTheTokenOnly(t *testing.T) {
	s := newService(t, leaf)
	dir := t.TempDir()
	s.RelaySidecarFiles(dir)
	withToken := map[string]string{TargetHeader: token}
	if w := serve(s, "PUT", "/rbl/sidecar/cds.json", nil, `{"resources": []}`); w.Code != 403 {
		t.Fatalf("without the token: %d", w.Code)
	}
	if _, err := os.Stat(filepath.Join(dir, "cds.json")); !os.IsNotExist(err) {
		t.Fatalf("a refused PUT wrote the file: %v", err)
	}
	for _, version := range []string{"1", "2"} {
		if w := serve(s, "PUT", "/rbl/sidecar/cds.json", withToken, `{"version_info": "`+version+`"}`); w.Code != 200 {
			t.Fatalf("PUT: %d %s", w.Code, w.Body.String())
		}
		written, err := os.ReadFile(filepath.Join(dir, "cds.json"))
		if err != nil || string(written) != `{"version_info": "`+version+`"}` {
			t.Fatalf("cds.json after version %s: %q %v", version, written, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("a partial file was left beside cds.json: %v", entries)
	}
}

func TestOnlyASidecarsOwnFilesAreWritten(t *testing.T) {
	s := newService(t, leaf)
	dir := t.TempDir()
	s.RelaySidecarFiles(dir)
	withToken := map[string]string{TargetHeader: token}
	for _, name := range []string{"envoy.json", "..%2Fcds.json", "../cds.json", "rds.yaml", ".cds.json.tmp"} {
		if w := serve(s, "PUT", "/rbl/sidecar/"+name, withToken, `{}`); w.Code != 400 && w.Code != 404 {
			t.Errorf("%s: %d", name, w.Code)
		}
	}
	if w := serve(s, "PUT", "/rbl/sidecar/ecds-adaptive-concurrency.json", withToken, `{}`); w.Code != 200 {
		t.Errorf("a filter's file: %d", w.Code)
	}
	if w := serve(s, "PUT", "/rbl/sidecar/rds.json", withToken, `not json`); w.Code != 400 {
		t.Errorf("a body that is not JSON: %d", w.Code)
	}
	if w := serve(s, "GET", "/rbl/sidecar/rds.json", withToken, ``); w.Code != 405 {
		t.Errorf("GET: %d", w.Code)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "ecds-adaptive-concurrency.json" {
		t.Fatalf("files written: %v", entries)
	}
}

func TestAReplicaWithoutASidecarDirectoryRelaysNothing(t *testing.T) {
	s := newService(t, leaf)
	if w := serve(s, "PUT", "/rbl/sidecar/rds.json", map[string]string{TargetHeader: token}, `{}`); w.Code != 404 {
		t.Fatalf("%d", w.Code)
	}
}
