#!/bin/sh
# What the convert-dataset workflow runs, and how to run the same locally:
#
#   examples/ci/convert-dataset.sh                 the bundled sample
#   DATASET=mnist examples/ci/convert-dataset.sh   mnistconv download first
#
# Outputs: examples/out/dataset/ (with SHA256SUMS) and examples/out/reports/ (the
# --json summary of every step). Make variables can follow, e.g. MNISTCONV=... .
set -eu
cd "$(dirname "$0")/.."
make "$@"
# Check the checksums again as a consumer of the artifact would.
make "$@" check
