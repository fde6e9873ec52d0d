"""A MedMNIST-224-sized split through every writer mnistconv has, held to the memory
budget (issue 37), as whole processes (see common.py for how each figure is taken).

The input is a generated pathmnist_224.npz in MedMNIST's layout (train_images uint8
10,000 x 224 x 224 x 3, 1.5 GB of pixels, stored uncompressed; train_labels (N, 1) of
PathMNIST's 9 classes): no network here, so the images are common.smooth_noise_images,
not tissue. Every format `mnistconv formats --json` lists as writable runs `mnistconv
convert pathmnist_224.npz OUT --to FORMAT --split train` once, with its defaults, or with
the option its declaration says makes it hold RGB (TFRecord: --image-format png); a
format whose declaration holds no RGB under any option is listed as not run, with its
one-line refusal. Peak memory is GNU time's maximum resident set size (the largest
process) and the sum of the proportional set sizes of the whole process tree (forked
workers), sampled every 50 ms; the target applies to the larger: under 300 MB. Each
output is then read back by mnistconv and must hold the input's pixels and labels
exactly, or the figure means nothing.

    BENCH_MEDMNIST_COUNT=500 python benchmarks/bench_medmnist224.py   # a small run
"""

import json
import os
import subprocess
import sys
import threading
import time
import zipfile

import common
from common import mnistconv

COUNT = int(os.environ.get("BENCH_MEDMNIST_COUNT", "10000"))
SIDE = 224
TARGET_MB = 300
PATHMNIST_CLASSES = 9
# Where each writer puts its output under the work directory (a file for the formats
# that write one, else a folder).
OUTPUT = {"npz": "out.npz", "tfrecord": "out.tfrecord", "arrayrecord": "out.array_record",
          "webdataset": "out/p.tar", "gdmnist": "out.bin"}


def write_npz(path, count, seed=224):
    """MedMNIST's layout, written 500 images at a time so the generator itself stays
    small: each member an .npy header, then its rows (zip64, stored)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, PATHMNIST_CLASSES, size=(count, 1), dtype=np.uint8)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        with archive.open("train_images.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_2_0(f, {
                "descr": "|u1", "fortran_order": False, "shape": (count, SIDE, SIDE, 3)})
            for start in range(0, count, 500):
                n = min(500, count - start)
                f.write(common.smooth_noise_images(n, SIDE, seed + start).tobytes())
        with archive.open("train_labels.npy", "w") as f:
            np.lib.format.write_array(f, labels)


def writers():
    """(format, extra options) of every writer, and {format: why not run}."""
    out = subprocess.run(mnistconv("formats", "--json"), env=common.env(), check=True,
                         capture_output=True, text=True).stdout
    run, not_run = [], {}
    for spec in json.loads(out):
        if not spec["write"]:
            continue
        if "RGB" in spec["holds"]["images"] or spec["holds"]["images"] == "any array":
            run.append((spec["name"], []))
            continue
        when = [w for w in spec["holds_when"] if "RGB" in w["holds"]["images"]]
        if when:
            option = "--" + when[0]["option"].replace("_", "-")
            run.append((spec["name"], [option] if when[0]["value"] is True
                        else [option, str(when[0]["value"])]))
        else:
            not_run[spec["name"]] = spec["holds"]["images"]
    return run, not_run


def peaks(cmd):
    """One run: (wall s, CPU s, GNU time's max RSS MB, the process tree's PSS peak MB)."""
    from bench_tfrecord import _tree_pss_kb
    started = time.perf_counter()
    proc = subprocess.Popen([common.GNU_TIME, "-v", *cmd], cwd=common.REPO,
                            env=common.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    tree = [0]

    def sample():
        while proc.poll() is None:
            tree[0] = max(tree[0], _tree_pss_kb(proc.pid))
            time.sleep(0.05)
    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate()
    sampler.join()
    wall = time.perf_counter() - started
    m = common._MAX_RSS.search(err)
    if proc.returncode or not m:
        raise common.CommandFailed(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n"
                                   f"{err.split(chr(9) + 'Command being timed:')[0][-2000:]}")
    cpu = sum(map(float, common._CPU.findall(err)))
    return wall, cpu, int(m.group(1)) * 1024 / common.MB, tree[0] * 1024 / common.MB


def rows(split):
    """A split's images one by one, whatever its reader's batch size."""
    for batch in split.batches(256):
        yield from batch.images


def same_content(source, output, fmt):
    """The output, read back by mnistconv, holds the input's pixels and labels."""

    import mnistconv as lib
    try:
        return _compare(lib.read(source, "medmnist").splits["train"],
                        lib.read(output, fmt).splits)
    except lib.MnistconvError as e:
        return f"mnistconv cannot read it back: {e}"


def _compare(a, b):
    import numpy as np
    b = b["train"] if "train" in b else next(iter(b.values()))
    if b.header.count != a.header.count:
        return f"{b.header.count} images, expected {a.header.count}"
    if not np.array_equal(a.labels().reshape(-1), b.labels().reshape(-1)):
        return "different labels"
    done = 0
    for x, y in zip(rows(a), rows(b)):
        if y.dtype != x.dtype:
            return f"pixels read back as {y.dtype}, not {x.dtype}"
        if not np.array_equal(x, y.reshape(x.shape)):
            return f"different pixels in image {done}"
        done += 1
    return None if done == a.header.count else f"read back {done} images"


def main():
    common.require_gnu_time()
    sys.path.insert(0, str(common.REPO))
    targets = common.Targets()
    with common.workdir() as tmp:
        source = tmp / "pathmnist_224.npz"
        started = time.perf_counter()
        write_npz(source, COUNT)
        print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; one run a writer; "
              f"input {source.name}: {COUNT:,} x {SIDE} x {SIDE} x 3 "
              f"({os.path.getsize(source) / common.MB:,.0f} MB, generated in "
              f"{time.perf_counter() - started:.0f} s)")
        run, not_run = writers()
        load_before = os.getloadavg()[0]
        rows = []
        for fmt, options in run:
            out = tmp / OUTPUT.get(fmt, "out")
            common.remove(out.parent if out.parent != tmp else out)
            cmd = mnistconv("convert", source, out, "--to", fmt, "--split", "train", "-q",
                            *options)
            wall, cpu, rss, tree = peaks(cmd)
            wrong = same_content(source, out.parent if fmt == "webdataset" else out, fmt)
            if wrong:
                print(f"  {fmt}: the output read back is not the input: {wrong}")
                targets.check(False, f"{fmt}: the output read back holds the input "
                                     f"({wrong})")
            size = sum(f.stat().st_size for f in
                       ([out] if out.is_file() else (out.parent if fmt == "webdataset"
                                                     else out).rglob("*")) if f.is_file())
            rows.append([fmt + (" " + " ".join(options) if options else ""), f"{wall:.1f}",
                         f"{cpu:.1f}", f"{rss:.0f}", f"{tree:.0f}", f"{size / common.MB:,.0f}"])
            print(f"  {rows[-1][0]:<32} {wall:7.1f} s wall {cpu:7.1f} s CPU  peak {rss:4.0f} MB "
                  f"largest process, {tree:4.0f} MB tree (PSS); output {size / common.MB:,.0f} "
                  f"MB, read back {'exact' if not wrong else 'WRONG'}", flush=True)
            common.remove(out.parent if out.parent != tmp else out)
            targets.check(max(rss, tree) < TARGET_MB,
                          f"{fmt}: peak {max(rss, tree):.0f} MB writing {COUNT:,} 224 x 224 "
                          f"RGB images (target: under {TARGET_MB} MB)")
        load = (load_before, os.getloadavg()[0])
        note = (f"{os.cpu_count()} cores; load average {load[0]:.1f} before these runs, "
                f"{load[1]:.1f} after")
        print(f"  ({note})")
        for fmt, holds in not_run.items():
            print(f"  not run: {fmt} declares {holds} images only (no RGB under any option)")
        common.record("table", title=f"MedMNIST-224-sized split ({COUNT:,} x 224 x 224 x 3) "
                                     f"through every writer, one run each ({note})",
                      columns=["writer", "wall s", "cpu s", "peak MB (largest process)",
                               "peak MB (process tree PSS)", "output MB"],
                      rows=rows + [[f, "not run: holds " + h, "", "", "", ""]
                                   for f, h in not_run.items()])
    targets.exit()


if __name__ == "__main__":
    common.run(main)
