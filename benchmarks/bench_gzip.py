"""IDX --gzip on the official files against GNU gzip on the same files, as whole
processes (see common.py for how each figure is taken):

  mnistconv convert DIR OUT --to idx --gzip                   (level 9, the default)
  mnistconv convert DIR OUT --to idx --gzip --gzip-level 6
  gzip -9nkf FILES...  and  gzip -6nkf FILES...               (one core, one stream)

DIR holds the four official files decompressed. mnistconv deflates in fixed 1 MiB blocks
on every core (mnistconv/io/parallel_gzip.py); GNU gzip is one stream on one core. Level 9
is most of the time: MNIST's runs of zeros make its long match search expensive (about
13 s of CPU for the training images, where level 6 takes about 1 s).

Targets: --gzip at most 1.1x `gzip -9n`'s wall time (less where a second core is
free; on a machine busy with other sessions each gets the same share of CPU, threads or
not, and the two take about as long: the "cores used" column shows which it was); its
output within 1 % of gzip -9n's size; every output passes `gzip -t` and decompresses to
its input; peak memory under 150 MB.
"""

import gzip
import shutil
import subprocess

from pathlib import Path

import common
from common import mnistconv

LEVELS = (9, 6)


def main():
    common.require_gnu_time()
    if not shutil.which("gzip"):
        common.skip("GNU gzip is not installed")
    targets = common.Targets()
    with common.workdir() as work:
        raw = common.decompressed_copy(work / "raw")
        plain = work / "plain"  # gzip -k writes beside its inputs: a copy of its own
        shutil.copytree(raw, plain)
        files = [str(plain / f) for f in common.MNIST_FILES]
        outs = {}
        commands = {}
        for level in LEVELS:
            name = f"mnistconv --gzip{'' if level == 9 else f' --gzip-level {level}'}"
            outs[name] = work / f"out{level}"
            commands[name] = mnistconv("convert", raw, outs[name], "--to", "idx", "--gzip",
                                       "--gzip-level", level, "-q")
        for level in LEVELS:
            commands[f"gzip -{level}n (4 files)"] = ["gzip", f"-{level}nkf", *files]

        def before(name):
            if name in outs:
                common.remove(outs[name])
            else:
                for f in files:
                    common.remove(Path(f + ".gz"))

        results = common.measure(commands, repeat=3, before=before,
                                 fewer={"gzip -9n (4 files)": 2,
                                        "mnistconv --gzip": 2})
        common.print_table("IDX --gzip of the four official files (ratios against "
                           "mnistconv --gzip)", results, "mnistconv --gzip")
        gnu = {9: "gzip -9n (4 files)", 6: "gzip -6n (4 files)"}
        ours = {9: "mnistconv --gzip", 6: "mnistconv --gzip --gzip-level 6"}
        print("\n  level  mnistconv / gzip -Nn: wall   cpu   cores used   train-images .gz "
              "bytes (mnistconv / gzip)")
        for level in LEVELS:
            a, b = results[ours[level]], results[gnu[level]]
            # The last gzip run left its .gz files: they are the same bytes every run.
            subprocess.run(["gzip", f"-{level}nkf", *files], check=True)
            mine = (outs[ours[level]] / "train-images-idx3-ubyte.gz").stat().st_size
            theirs = Path(files[0] + ".gz").stat().st_size
            print(f"  {level:>5}  {a.seconds / b.seconds:>26.2f}x "
                  f"{a.cpu_seconds / b.cpu_seconds:>5.2f}x {a.cpu_seconds / a.seconds:>12.2f}"
                  f"   {mine:,} / {theirs:,} = "
                  f"{mine / theirs:.4f}")
            if level == 9:
                targets.check(a.seconds <= 1.1 * b.seconds,
                              f"--gzip {a.seconds:.2f} s vs gzip -9n {b.seconds:.2f} s "
                              f"({a.seconds / b.seconds:.2f}x; target: at most 1.1x)")
                targets.check(mine <= theirs * 1.01, f"--gzip output {mine / theirs:.4f} of "
                                                     "gzip -9n's size (target: within 1 %)")
            targets.check(a.peak_mb < 150, f"{ours[level]} peak memory {a.peak_mb:.1f} MB "
                                           "(target: under 150 MB)")
            for f in common.MNIST_FILES:
                out = outs[ours[level]] / f"{f}.gz"
                ok = subprocess.run(["gzip", "-t", str(out)]).returncode == 0
                with gzip.open(out, "rb") as got, open(raw / f, "rb") as want:
                    while ok:
                        block = got.read(1 << 20)
                        ok = block == want.read(len(block) or 1 << 20)
                        if not block:
                            break
                targets.check(ok, f"{out.name} (level {level}) passes gzip -t and "
                                  "decompresses to its input")
    targets.exit()


if __name__ == "__main__":
    common.run(main)
