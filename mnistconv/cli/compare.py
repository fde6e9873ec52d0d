"""compare: two datasets split by split, for checking a conversion."""

import math

import click

from ..errors import UsageError
from .common import bundle, emit_json, make_progress, max_image_size_option, run_options, \
    say, follow_links_option, timeout_option
from .inputs import Input, all_options, format_options, from_option


def _pairs(specs):
    pairs = []
    for spec in specs:
        a, sep, b = spec.partition(":")
        if not a or (sep and not b):
            raise UsageError(None, f"--split {spec!r} is not NAME or A_NAME:B_NAME",
                             "write e.g. --split test, or --split train:training")
        pairs.append((a, b or a))
    return pairs


def _fmt(x, digits=3):
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, float) and abs(x) >= 1e6:  # float64 pixels can be huge
        return f"{x:.4g}"
    return f"{x:.{digits}f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


def _report(result, path_a, path_b, fmt_a, fmt_b):
    """The human-readable comparison, one block per pair of splits."""
    lines = [f"A: {path_a} ({fmt_a})", f"B: {path_b} ({fmt_b})"]
    for s in result.splits:
        names = s.name_a if s.name_a == s.name_b else f"{s.name_a} ~ {s.name_b}"
        shapes = "x".join(map(str, s.shape_a))
        if not s.shapes_match:
            shapes += " vs " + "x".join(map(str, s.shape_b))
        lines.append(f"{names}: {s.count_a} vs {s.count_b} images, {shapes}")
        if s.compared:
            agree = s.compared - s.label_mismatches
            lines.append(f"  labels: {agree}/{s.compared} agree "
                         f"({100 * s.label_agreement:.2f}%)")
            for e in s.first_label_mismatches[:5]:
                lines.append(f"    position {e.position} (#{e.index_a}): label "
                             f"{e.label_a} vs {e.label_b}")
            if s.pixels:
                psnr = "inf (identical)" if s.psnr == math.inf else f"{s.psnr:.2f} dB"
                lines.append(f"  pixels: mean error {_fmt(s.mean_error)}, max "
                             f"{_fmt(s.max_error)}, {100 * s.share_differing:.2f}% differ, "
                             f"PSNR {psnr}")
                if s.channel_max:  # colour: where the difference is
                    names = "RGBA" if len(s.channel_max) in (3, 4) else "01"
                    lines.append("  channels: " + ", ".join(
                        f"{names[c]} mean {_fmt(m)} max {_fmt(x)}" for c, (m, x) in
                        enumerate(zip(s.channel_mean_error, s.channel_max))))
            else:
                lines.append("  pixels: none (the images have no pixels)")
            if s.worst:
                lines.append("  worst (by max, then mean error):")
                lines.extend(f"    position {e.position} (#{e.index_a}, label {e.label_a}): "
                             f"max {_fmt(e.max_error)}, mean {_fmt(e.mean_error)}"
                             for e in s.worst)
        problems = s.problems()
        lines.append("  " + ("equal" if not problems else "DIFFERENT: " +
                             "; ".join(problems)))
    for side, names in (("A", result.only_a), ("B", result.only_b)):
        if names:
            why = " (missing on the other side)" if result.missing_counts else ""
            lines.append(f"only in {side}, not compared: {', '.join(names)}{why}")
    lines.extend(f"hint: {text}" for text in result.advice)
    verdict = (f"equal (tolerance {_fmt(result.tolerance)})" if result.equal
               else "different")
    lines.append(f"result: {verdict}")
    return "\n".join(lines)


def _sides(a, b, from_a, from_b):
    """A and B, their formats named or detected."""
    return Input(a, from_a, "--from-a"), Input(b, from_b, "--from-b")


@click.command()
@bundle("sides", _sides,
        click.argument("a"), click.argument("b"),
        from_option("--from-a", "from_a", help="Format of A (default: detected)."),
        from_option("--from-b", "from_b", help="Format of B (default: detected)."))
@click.option("--split", "splits", multiple=True, metavar="NAME|A:B",
              help="Compare only this split (repeatable); A_NAME:B_NAME pairs splits "
                   "named differently.")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Largest pixel difference (0..255 scale) still counted as equal.")
@click.option("--worst", type=click.IntRange(min=0), default=5, show_default=True,
              metavar="N", help="List the N examples that differ most.")
@format_options(all_options("read"))
@timeout_option
@follow_links_option
@max_image_size_option
@run_options("quiet", "json")
def compare(sides, splits, tolerance, worst, run, **values):
    """Compare datasets A and B (any formats) split by split: counts, label agreement,
    pixel error (mean, max, share of pixels that differ, PSNR) and the worst examples.
    Exit code 0 when they are equal within --tolerance, 1 when not.

    Splits pair up by name. If one side has a single split and the other several, the
    single split is compared with the one of the same name (the rest is not compared);
    if there is none, name it: --split NAME or --split A_NAME:B_NAME. Two multi-split
    datasets must have the same splits. Pixels are compared position by position on
    the 0..255 scale (float pixels in [0, 1] are scaled by 255). Read options such as
    --prefix apply to each side whose format takes them.

    \b
    Examples:
      mnistconv compare data/mnist mnist.npz
      mnistconv compare data/mnist out/train.tfrecord --tolerance 40
      mnistconv compare mnist.npz other.npz --split test --json
    """
    from ..views import compare as comparing
    (side_a, side_b), quiet, as_json = sides, run.quiet, run.as_json
    a, b = side_a.path, side_b.path
    # A read option (--prefix, --schema, ...) applies to each side whose format has it.
    dataset_a, dataset_b = side_a.read(values), side_b.read(values)
    fmt_a, fmt_b = side_a.format, side_b.format
    # The bars stop (their final lines kept) before the report goes to stdout.
    with make_progress(quiet or as_json) as progress:
        result = comparing.compare(dataset_a, dataset_b, _pairs(splits) or None,
                                   tolerance, worst, progress=progress, where=(a, b))
    if as_json:
        emit_json({"a": {"path": a, "format": fmt_a.name},
                   "b": {"path": b, "format": fmt_b.name}, **result.to_json()})
    elif not quiet:
        say(_report(result, a, b, fmt_a.name, fmt_b.name))
    return 0 if result.equal else 1
