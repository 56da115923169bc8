#!/bin/sh
# Snapshot tests of every examples/*.rbl: vscode-tmgrammar-snap keeps FILE.snap beside FILE, so the
# examples are copied next to their snapshots in tests/snap/ for the run and removed afterwards.
# Extra arguments go to vscode-tmgrammar-snap (--updateSnapshot rewrites the snapshots).
set -u
cd "$(dirname "$0")/.."
cp ../../examples/*.rbl tests/snap/
npx vscode-tmgrammar-snap "$@" 'tests/snap/*.rbl'
status=$?
rm -f tests/snap/*.rbl
exit $status
