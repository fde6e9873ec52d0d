"""`mnistconv pack browser` on the official files against a hand-written numpy + gzip
build script (benchmarks/baselines/numpy_browser_pack.py), and `mnistconv verify` of the
pack. Both builds write the same eight .bin/.bin.gz files (checked here against each
other and the published SHA-256); mnistconv also checks its input, writes preview.json
and the manifest, and stages its output.

Targets: pack no slower than 1.25x the hand script (level-9 gzip is most of both; mnistconv
runs it in parallel threads); peak memory under 150 MB; verify under a third of the pack.
"""

import hashlib

import common
from common import mnistconv, python

PUBLISHED_SHA256 = {
    "train.bin": "13df23663e03e6c82b1abd10f96b9d7fec1c123abe21dff07bf4bfe6aa6a73e4",
    "train.bin.gz": "7aa3f28416ea48f8e27a5abd8b08194b40aae4198f4e579aac0986f9e4ac6be6",
    "validation.bin": "ad4219367538e85183f22794f637be7975a98b231da4754b845bc7f0e4990aa8",
    "validation.bin.gz": "b3160bc7c0b9781f530373d2d3589580a3a6808b103a6db54dd553cc0227cbcc",
    "test.bin": "7e6f5d26ef7ba2d654166378dab39f9ba1a92fd928c59b1fb0ba0bcbecdee386",
    "test.bin.gz": "9c6c4d5d44d5c893d7aab31f8039094047136f41e9ed9b87c53fe64885671675",
    "test-full.bin": "b1666e5ed9f4a197d176630fe8791b487392c30fdeb0863277c2d76897f0ed85",
    "test-full.bin.gz": "0e04414e49b81961ce7994768709c5b3adba9fb72f4b7b79023cd8438791a8c3",
}


def main():
    common.require_gnu_time()
    src = common.official_gz_dir()
    targets = common.Targets()
    with common.workdir() as work:
        outs = {"mnistconv pack browser DIR OUT": work / "ours",
                "numpy + gzip script": work / "script"}
        commands = {"mnistconv pack browser DIR OUT": mnistconv(
                        "pack", "browser", "-q", src, outs["mnistconv pack browser DIR OUT"]),
                    "numpy + gzip script": python("numpy_browser_pack.py", src,
                                                  outs["numpy + gzip script"])}
        results = common.measure(commands, repeat=3,
                                 before=lambda name: common.remove(outs[name]))
        common.print_table("Building the browser-v1 pack from the official .gz files",
                           results, "mnistconv pack browser DIR OUT")
        for name, out in outs.items():
            for file, sha in PUBLISHED_SHA256.items():
                got = hashlib.sha256((out / file).read_bytes()).hexdigest()
                if got != sha:
                    print(f"  {name}: {file} has SHA-256 {got}, published {sha}")
                    targets.check(False, f"{name} reproduces the published {file}")
        verify = common.measure({"mnistconv verify OUT/manifest.json": mnistconv(
            "verify", "-q", outs["mnistconv pack browser DIR OUT"] / "manifest.json")},
            repeat=3)
        common.print_table("Verifying the pack (sizes, SHA-256, headers, class counts)",
                           verify, "mnistconv verify OUT/manifest.json")
    ours = results["mnistconv pack browser DIR OUT"]
    script = results["numpy + gzip script"]
    targets.check(ours.seconds <= 1.25 * script.seconds,
                  f"pack {ours.seconds:.2f} s vs the script {script.seconds:.2f} s "
                  f"({ours.seconds / script.seconds:.2f}x; target: at most 1.25x)")
    targets.check(ours.peak_mb < 150, f"pack peak memory {ours.peak_mb:.1f} MB "
                                      "(target: under 150 MB)")
    v = verify["mnistconv verify OUT/manifest.json"]
    targets.check(v.seconds < ours.seconds / 3,
                  f"verify {v.seconds:.2f} s (target: under a third of the pack's "
                  f"{ours.seconds:.2f} s)")
    targets.exit()


if __name__ == "__main__":
    main()
