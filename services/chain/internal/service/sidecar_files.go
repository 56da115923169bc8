package service

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
)

// maxSidecarFile bounds PUT /rbl/sidecar/NAME's body: one route configuration or cluster list.
const maxSidecarFile = 4 << 20

// sidecarFileName is every file a sidecar watches (rbl/mesh/sidecar.py): its route, its
// clusters, and its filters' configs; nothing else can be written.
var sidecarFileName = regexp.MustCompile(`^(rds|cds|ecds-[a-z0-9-]+)\.json$`)

// RelaySidecarFiles lets the runner replace the files this replica's sidecar Envoy watches in dir.
// In a Kubernetes pod the sidecar shares a volume with the replica and nothing else, so the
// runner, in another pod, writes through the replica.
func (s *Service) RelaySidecarFiles(dir string) { s.sidecarDir = dir }

// sidecarFile serves PUT /rbl/sidecar/NAME: the body written beside NAME and renamed over it, so
// Envoy's file watch sees one complete file, as when the runner writes it on its own machine.
func (s *Service) sidecarFile(w http.ResponseWriter, r *http.Request, name string) {
	if s.sidecarDir == "" {
		reply(w, http.StatusNotFound, "this replica relays no sidecar files (started without --sidecar-dir)")
		return
	}
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", "PUT")
		reply(w, http.StatusMethodNotAllowed, "/rbl/sidecar/NAME takes PUT")
		return
	}
	if !sidecarFileName.MatchString(name) {
		reply(w, http.StatusBadRequest, "not a sidecar file: "+name+" (rds.json, cds.json, ecds-NAME.json)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSidecarFile))
	if err != nil {
		reply(w, http.StatusBadRequest, "not a sidecar file: "+err.Error())
		return
	}
	if !json.Valid(body) {
		reply(w, http.StatusBadRequest, name+" is not JSON")
		return
	}
	if err := replaceFile(filepath.Join(s.sidecarDir, name), body); err != nil {
		reply(w, http.StatusInternalServerError, err.Error())
		return
	}
	reply(w, http.StatusOK, "ok")
}

// replaceFile writes a new partial file (a leftover is removed first, never written through)
// and renames it into place.
func replaceFile(path string, body []byte) error {
	partial := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.Remove(partial); err != nil && !os.IsNotExist(err) {
		return err
	}
	out, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := out.Write(body); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(partial, path)
}
