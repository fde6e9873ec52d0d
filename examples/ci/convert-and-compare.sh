#!/bin/sh
# Convert, then check the output against the input, in CI: each step's --json report
# is kept (upload $OUT/reports/ as an artifact, `if: always()`), and a failed step
# still leaves its report ({"error": ..., "exit": N}) and fails the job.
#
#   examples/ci/convert-and-compare.sh                         the bundled sample
#   SRC=data/mnist OUT=build examples/ci/convert-and-compare.sh
#
# PNG keeps pixels exact, so compare passes with tolerance 0. With JPEG (the TFRecord
# default) compare says which --tolerance would pass.
set -eu
MNISTCONV=${MNISTCONV:-mnistconv}
SRC=${SRC:-$(dirname "$0")/../data/mnist-sample}
OUT=${OUT:-out}
OPTS=${OPTS:---image-format png}
mkdir -p "$OUT/reports"
# shellcheck disable=SC2086  # OPTS is a list of options
"$MNISTCONV" convert "$SRC" "$OUT/dataset/mnist.tfrecord" $OPTS --sha256sums --force \
  -q --json > "$OUT/reports/convert.json"
"$MNISTCONV" compare "$SRC" "$OUT/dataset" -q --json > "$OUT/reports/compare.json"
(cd "$OUT/dataset" && sha256sum -c --quiet SHA256SUMS)
