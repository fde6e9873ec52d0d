#!/usr/bin/env bash
# Conversions chained through pipes: '-' is stdin or stdout for the single-stream
# formats (npz, TFRecord, GDMNIST1), so no intermediate file is written.
#
#   examples/pipeline.sh [SRC] [OUT]    (defaults: the bundled sample, pipeline-out/)
#
# MNISTCONV=path/to/mnistconv when it is not on PATH.
set -euo pipefail

MNISTCONV=${MNISTCONV:-mnistconv}
SRC=${1:-$(dirname "$0")/data/mnist-sample}
OUT=${2:-pipeline-out}
mkdir -p "$OUT"

# The test split as a browser file: IDX -> npz on the pipe -> GDMNIST1.
"$MNISTCONV" idx-to-npz "$SRC" - --split test -q \
  | "$MNISTCONV" npz-to-gdmnist - "$OUT/test.bin" -q --force

# A class-balanced, shuffled subset (10 per digit) written and hashed in one pass, as
# before an upload; the .sha256 line checks with `sha256sum -c`.
"$MNISTCONV" idx-to-npz "$SRC" - --per-class 10 --shuffle --seed 7 -q \
  | tee "$OUT/subset.npz" | sha256sum | sed 's/-$/subset.npz/' > "$OUT/subset.npz.sha256"

# Data arriving on stdin (here a file; in practice `curl -sL URL | ...` or
# `ssh host cat mnist.npz | ...`) unpacked as gzip IDX for PyTorch's torchvision.
"$MNISTCONV" npz-to-idx - "$OUT/subset-idx" --gzip -q --force < "$OUT/subset.npz"

# TFRecord is one split per stream: records written to stdout (as to
# `gsutil cp - gs://bucket/test.tfrecord`) and read back from stdin, where nothing
# names the split. PNG (--preset tfds) keeps the pixels exact.
"$MNISTCONV" idx-to-tfrecord "$SRC" - --split test --preset tfds -q \
  | "$MNISTCONV" tfrecord-to-npz - "$OUT/test-via-tfrecord.npz" --split-name test -q --force
