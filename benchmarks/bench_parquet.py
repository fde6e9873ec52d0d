"""The official 60000-image training set to Hugging Face Parquet, against the Hugging
Face recipe, as whole processes in the same run (see common.py for how each figure is
taken):

    baselines/hf_datasets_to_parquet.py   numpy arrays -> datasets.Dataset.from_dict ->
                                          cast_column("image", Image()) + ClassLabel ->
                                          to_parquet
    mnistconv convert MNIST out/ --to parquet --split train

Both read the official .gz files. The outputs must hold the same pixels and labels
(read back by mnistconv's reader; the recipe's images are TIFF, since datasets turns a
numpy image into int64 lists on the way, mnistconv's PNG), or the timing means nothing.
Targets: mnistconv at least 5x faster; peak memory of mnistconv under 200 MB (the
recipe's is printed: it holds the whole set several times over).
"""

import os
import sys

import common
from common import mnistconv

TARGET_RATIO = 5
TARGET_MB = 200
RECIPE = "datasets recipe (from_dict + cast_column + to_parquet)"
OURS = "mnistconv --to parquet"


def same_rows(recipe, ours):
    sys.path.insert(0, str(common.REPO))
    import numpy as np

    import mnistconv
    a = mnistconv.read(recipe, "parquet").splits
    b = mnistconv.read(ours, "parquet").splits["train"]
    a = next(iter(a.values()))
    if a.header.count != b.header.count or not np.array_equal(a.labels(), b.labels()):
        raise SystemExit("error: the recipe and mnistconv wrote different labels")
    for x, y in zip(a.batches(), b.batches()):
        if not np.array_equal(x.images, y.images):
            raise SystemExit("error: the recipe and mnistconv wrote different pixels")
    print(f"  (all {b.header.count} rows hold the same pixels and labels; files "
          f"{os.path.getsize(recipe) / common.MB:.1f} MB (recipe, TIFF) and "
          f"{sum(os.path.getsize(f) for f in b.files) / common.MB:.1f} MB (mnistconv, PNG))")


def main():
    gz, targets = common.start("the recipe", ["datasets", "pyarrow"],
                               "mnistconv[parquet,test-parquet]", " (the recipe: 2)")
    with common.workdir() as tmp:
        outputs = {RECIPE: tmp / "recipe.parquet", OURS: tmp / "ours"}
        commands = {RECIPE: common.python("hf_datasets_to_parquet.py", gz, outputs[RECIPE]),
                    OURS: mnistconv("convert", gz, outputs[OURS], "--to", "parquet",
                                    "--split", "train", "-q")}
        os.environ["HF_DATASETS_CACHE"] = str(tmp / "hf-cache")
        os.environ["HF_HUB_OFFLINE"] = "1"
        results = common.measure(commands, before=lambda name: common.remove(outputs[name]),
                                 fewer={RECIPE: 2})
        common.print_table("Official training set (60000) to Hugging Face Parquet", results,
                           OURS)
        same_rows(outputs[RECIPE], outputs[OURS])
        ratio = results[RECIPE].seconds / results[OURS].seconds
        targets.check(ratio >= TARGET_RATIO, f"mnistconv {ratio:.1f}x faster than the "
                                             f"datasets recipe (target {TARGET_RATIO}x)")
        peak = results[OURS].peak_mb
        targets.check(peak < TARGET_MB, f"mnistconv peak memory {peak:.0f} MB (target under "
                                        f"{TARGET_MB} MB; the recipe's "
                                        f"{results[RECIPE].peak_mb:.0f} MB)")
    targets.exit()


if __name__ == "__main__":
    common.run(main)
