"""What describing an output costs (issue 29), as whole processes in the same run (see
common.py for how each figure is taken), on the official 60000-image training set:

    mnistconv idx-to-tfrecord MNIST out.tfrecord --split train
    ... the same with --index-files                 (<file>.idx beside it)
    ... the same with --card                        (out.tfrecord.card.html)
    mnistconv idx-to-parquet MNIST out/ --split train        (croissant.json always)
    ... the same with --card

Run as users type them (no -q: the files' SHA-256 are computed and shown, as a card
lists them). Targets: --index-files and --card each add under 10% to their conversion's
median wall time. The CPU-time ratio is printed beside it (steadier when other sessions share the
machine). Each output is checked: the index lists 60000 records, the card shows 60000.
"""

import common
from common import mnistconv

TARGET = 1.10


def main():
    gz, targets = common.start("bench_describe", (), "")
    with common.workdir() as work:
        outs = {}

        def conversion(name, fmt, dst, *extra):
            outs[name] = (work / dst, extra)
            return mnistconv(f"idx-to-{fmt}", gz, work / dst, "--split", "train", *extra)
        commands = {
            "tfrecord": conversion("tfrecord", "tfrecord", "a.tfrecord"),
            "tfrecord --index-files": conversion("tfrecord --index-files", "tfrecord",
                                                 "b.tfrecord", "--index-files"),
            "tfrecord --card": conversion("tfrecord --card", "tfrecord", "c.tfrecord",
                                          "--card"),
            "parquet": conversion("parquet", "parquet", "d"),
            "parquet --card": conversion("parquet --card", "parquet", "e", "--card"),
        }

        def before(name):
            dst, _ = outs[name]
            for path in (dst, dst.with_name(dst.name + ".idx"),
                         dst.with_name(dst.name + ".card.html")):
                common.remove(path)

        results = common.measure(commands, before=before)
        common.print_table("The MNIST training set, with and without what describes it "
                           "(ratios against tfrecord)", results, "tfrecord")
        index = (work / "b.tfrecord.idx").read_text().splitlines()
        card = (work / "c.tfrecord.card.html").read_text()
        targets.check(len(index) == 60000, f"the index lists {len(index)} records")
        targets.check('data-count="60000"' in card, "the card shows 60000 examples")
        targets.check((work / "d" / "croissant.json").is_file(), "croissant.json written")
        for base, extra in (("tfrecord", "tfrecord --index-files"),
                            ("tfrecord", "tfrecord --card"),
                            ("parquet", "parquet --card")):
            a, b = results[base], results[extra]
            wall, cpu = b.seconds / a.seconds, b.cpu_seconds / a.cpu_seconds
            targets.check(wall < TARGET, f"{extra}: {wall:.3f}x the wall time of {base} "
                                         f"(cpu {cpu:.3f}x), under {TARGET:.2f}x")
    targets.exit()


if __name__ == "__main__":
    common.run(main)
