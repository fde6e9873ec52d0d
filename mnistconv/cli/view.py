"""show, preview and compare: looking at a dataset, and checking a conversion."""

import math
import re

import click

from .. import registry
from ..errors import UsageError
from .common import emit_json, force_option, json_option, make_progress, note, quiet_option
from .convert import _all_options, _options_for, format_options

DEFAULT_SHOW = 10


def _read(path, from_name, values, transpose=False):
    import mnistconv
    from ..stream import TransposedSplit
    reader = registry.get(from_name) if from_name else registry.detect_input(path)
    dataset = mnistconv.read(path, reader.name, **_options_for(reader.read_options, values))
    if transpose:
        dataset.splits = {n: TransposedSplit(s) for n, s in dataset.splits.items()}
    return reader, dataset


def _one_split(dataset, path, name, quiet):
    """The split asked for, or the first one (saying which, when there are several)."""
    if name:
        if name not in dataset.splits:
            raise UsageError(path, f"no split named {name}",
                             f"splits present: {', '.join(dataset.splits) or 'none'}")
        return dataset.splits[name]
    if not dataset.splits:
        raise UsageError(path, "holds no splits")
    first, *others = dataset.splits
    if others:
        note(f"showing split {first}; also in {path}: {', '.join(others)} "
             "(choose with --split)", quiet)
    return dataset.splits[first]


def parse_index(spec, count, path=None):
    """Positions from '0:20', '5', '-3:', '1,4,10:12' (Python slice rules, no step
    beyond a:b:c). A single index outside the split is an error."""
    import numpy as np
    positions = []
    for part in spec.split(","):
        part = part.strip()
        if not re.fullmatch(r"-?\d*(:-?\d*){0,2}", part) or not part:
            raise UsageError(None, f"--index {spec!r} is not a list of positions or "
                                   "ranges", "write e.g. 0:20 or 3,7,10:12")
        if ":" in part:
            bounds = [int(b) if b else None for b in part.split(":")]
            if len(bounds) == 3 and bounds[2] == 0:
                raise UsageError(None, f"--index {spec!r}: a step cannot be 0")
            positions.extend(range(count)[slice(*bounds)])
        else:
            i = int(part)
            if not -count <= i < count:
                raise UsageError(path, f"--index {i} is outside the split "
                                       f"({count} images)")
            positions.append(i % count)
    return np.array(positions, dtype=np.int64)


def parse_grid(spec):
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", spec or "")
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise UsageError(None, f"--grid {spec!r} is not COLSxROWS", "write e.g. 10x2")
    return int(m.group(1)), int(m.group(2))


def _chosen(split, path, index, per_class, grid):
    """Positions to show and, when --grid is given, the numbers of columns and rows
    (None, None without it). The positions are at most COLS x ROWS; show() keeps ROWS
    lines' worth once it knows how many tiles fit the terminal's width."""
    import numpy as np
    from .. import view
    if index is not None and per_class is not None:
        raise UsageError(None, "--index and --per-class choose images in different ways",
                         "give one of them")
    cols, rows = (None, None) if grid is None else parse_grid(grid)
    limit = None if rows is None else cols * rows
    count = split.header.count
    if index is not None:
        positions = parse_index(index, count, path)
    elif per_class is not None:
        groups = view.per_class_positions(split.labels(), per_class)
        positions = np.concatenate(list(groups.values()) or [np.zeros(0, np.int64)])
    else:
        positions = np.arange(min(count, limit or DEFAULT_SHOW), dtype=np.int64)
    if limit is not None:
        positions = positions[:limit]
    return positions, cols, rows


def _split_options(f):
    for decorator in reversed([
        click.option("--from", "from_name", type=click.Choice(list(registry.FORMATS)),
                     help="Input format (default: detected)."),
        format_options(_all_options("read")),
        click.option("--split", "split_name", metavar="NAME",
                     help="The split to draw (default: the first, e.g. train)."),
        click.option("--transpose", is_flag=True,
                     help="Swap rows and columns first (EMNIST is stored transposed)."),
    ]):
        f = decorator(f)
    return f


@click.command()
@click.argument("path")
@_split_options
@click.option("--index", metavar="SPEC",
              help="Positions to draw: 0:20, 5, -3:, 1,4,10:12 (default: the first 10).")
@click.option("--per-class", type=click.IntRange(min=1), metavar="N",
              help="The first N images of each class, class by class.")
@click.option("--grid", metavar="COLSxROWS",
              help="At most COLS images per line (fewer if the terminal is narrower) "
                   "and ROWS lines of images.")
@click.option("--ascii", "force_ascii", is_flag=True,
              help="Plain ASCII shading even on a colour terminal.")
@quiet_option
def show(path, from_name, split_name, transpose, index, per_class, grid, force_ascii,
         quiet, **values):
    """Draw images of PATH in the terminal, each with its label and original index
    (label #index) under it, wrapped to the terminal width.

    On a colour terminal each character cell holds two pixels (half blocks, grayscale);
    with NO_COLOR set, TERM=dumb, or output to a file or pipe, it is plain ASCII shading
    (' .:-=+*#%@', two pixel rows per character). FORCE_COLOR forces colour.

    \b
    Examples:
      mnistconv show data/mnist --index 0:20
      mnistconv show data/mnist --split test --per-class 2
      mnistconv show emnist/ --prefix emnist-letters --transpose --grid 8x2
    """
    from rich.console import Console
    from .. import view
    _, dataset = _read(path, from_name, values, transpose)
    split = _one_split(dataset, path, split_name, quiet)
    positions, cols, rows = _chosen(split, path, index, per_class, grid)
    if len(positions) == 0:
        note(f"{path}: no images to show", quiet)
        return 0
    images = split.take(positions)
    labels = split.labels()[positions]
    indices = split.indices()[positions]
    try:
        images = view.to_gray_uint8(images)
    except ValueError as e:
        raise UsageError(path, str(e)) from None
    captions = [view.caption(lab.item(), i.item()) for lab, i in zip(labels, indices)]
    console = Console(highlight=False, soft_wrap=False)
    width = console.width
    if rows is not None:
        # ROWS lines of images: fewer per line when the terminal is narrower than
        # COLS tiles, so fewer images (5x1 in 80 columns is 2 images, not 3 lines).
        keep = view.tiles_per_line(images, captions, width, cols) * rows
        images, captions = images[:keep], captions[:keep]
    colour = (console.is_terminal and not console.no_color
              and console.color_system is not None and not force_ascii)
    if colour:
        console.print(view.render_blocks(images, captions, width, cols), end="")
    else:
        click.echo(view.render_ascii(images, captions, width, cols), nl=False)
    return 0


@click.command()
@click.argument("path")
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write the sheet, in the format its name says: .png, .jpg or "
                   ".jpeg (JPEG, quality 95), .webp (lossless); '-' for PNG on stdout.")
@_split_options
@click.option("--per-class", type=click.IntRange(min=1), default=10, show_default=True,
              metavar="N", help="Images per class (per row).")
@click.option("--scale", type=click.IntRange(min=1, max=16), default=2, show_default=True,
              metavar="K", help="Each pixel becomes K x K.")
@force_option
@quiet_option
@json_option
def preview(path, output, from_name, split_name, transpose, per_class, scale, force, quiet,
            as_json, **values):
    """Write a contact sheet of PATH (PNG, JPEG or WebP): one row per class, the class on the left, the
    first N images of that class (in file order) with each one's original index under it.

    \b
    Examples:
      mnistconv preview data/mnist -o sheet.png
      mnistconv preview data/mnist --split test --per-class 20 --scale 1 -o test.png
      mnistconv preview data/mnist -o sheet.webp
    """
    from .. import view
    from ..fileio import StagedOutput, output_file_info
    if output == "-" and as_json:
        raise UsageError(None, "--json prints on stdout, which '-' uses for the PNG")
    ext = view.sheet_format(output)
    if ext is None:
        # Before reading anything: a .gif or .txt would get bytes of another format.
        raise UsageError(output, "cannot tell the image format from the name",
                         "end it in .png, .jpg, .jpeg or .webp")
    _, dataset = _read(path, from_name, values, transpose)
    split = _one_split(dataset, path, split_name, quiet or as_json)
    groups = view.per_class_positions(split.labels(), per_class)
    if not groups:
        raise UsageError(path, f"split {split.name} holds no images to preview")
    import numpy as np
    order = np.concatenate(list(groups.values()) or [np.zeros(0, np.int64)])
    # One gather for the whole sheet, in increasing order (sequential for streams).
    wanted = np.unique(order)
    images = split.take(wanted)
    indices = split.indices()
    rows = []
    for label, positions in groups.items():
        at = np.searchsorted(wanted, positions)
        rows.append((str(label), images[at], [f"#{indices[p]}" for p in positions]))
    try:
        sheet, _ = view.contact_sheet(rows, scale)
    except ValueError as e:
        raise UsageError(path, str(e)) from None
    data = view.encode_sheet(sheet, ext)
    kind = view.SHEET_FORMATS[ext][0]
    with StagedOutput(force) as staged:
        tmp = staged.file(output)
        with open(tmp, "wb") as f:
            f.write(data)
        info = output_file_info(tmp)
    facts = {"path": output, "format": kind, "bytes": info.bytes, "sha256": info.sha256,
             "width": int(sheet.shape[1]), "height": int(sheet.shape[0]),
             "split": split.name, "classes": len(groups),
             "images": int(sum(len(p) for p in groups.values()))}
    if as_json:
        emit_json(facts)
    elif output != "-":
        note(f"{output}: {facts['width']}x{facts['height']} {kind}, {facts['classes']} "
             f"classes x up to {per_class} images, {facts['bytes']:,} bytes", quiet)
    return 0


def _pairs(specs):
    pairs = []
    for spec in specs:
        a, sep, b = spec.partition(":")
        if not a or (sep and not b):
            raise UsageError(None, f"--split {spec!r} is not NAME or A_NAME:B_NAME")
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
    verdict = (f"equal (tolerance {_fmt(result.tolerance)})" if result.equal
               else "different")
    lines.append(f"result: {verdict}")
    return "\n".join(lines)


@click.command()
@click.argument("a")
@click.argument("b")
@click.option("--from-a", "from_a", type=click.Choice(list(registry.FORMATS)),
              help="Format of A (default: detected).")
@click.option("--from-b", "from_b", type=click.Choice(list(registry.FORMATS)),
              help="Format of B (default: detected).")
@click.option("--split", "splits", multiple=True, metavar="NAME|A:B",
              help="Compare only this split (repeatable); A_NAME:B_NAME pairs splits "
                   "named differently.")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Largest pixel difference (0..255 scale) still counted as equal.")
@click.option("--worst", type=click.IntRange(min=0), default=5, show_default=True,
              metavar="N", help="List the N examples that differ most.")
@format_options(_all_options("read"))
@quiet_option
@json_option
def compare(a, b, from_a, from_b, splits, tolerance, worst, quiet, as_json, **values):
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
    import mnistconv
    from .. import compare as comparing
    fmt_a = registry.get(from_a) if from_a else registry.detect_input(a, "--from-a")
    fmt_b = registry.get(from_b) if from_b else registry.detect_input(b, "--from-b")
    # A read option (--prefix, --schema, ...) applies to each side whose format has it.
    dataset_a = mnistconv.read(a, fmt_a.name, **_options_for(fmt_a.read_options, values))
    dataset_b = mnistconv.read(b, fmt_b.name, **_options_for(fmt_b.read_options, values))
    # The bars stop (their final lines kept) before the report goes to stdout.
    with make_progress(quiet or as_json) as progress:
        result = comparing.compare(dataset_a, dataset_b, _pairs(splits) or None,
                                   tolerance, worst, progress=progress, where=(a, b))
    if as_json:
        emit_json({"a": {"path": a, "format": fmt_a.name},
                   "b": {"path": b, "format": fmt_b.name}, **result.to_json()})
    elif not quiet:
        click.echo(_report(result, a, b, fmt_a.name, fmt_b.name))
    return 0 if result.equal else 1


# --- for `info` ------------------------------------------------------------------------

def print_histogram(class_counts, indent="    "):
    """Per-class bars on stdout: unicode blocks (coloured unless NO_COLOR) on a terminal,
    '#' bars in plain ASCII otherwise (logs, pipes)."""
    from rich.console import Console
    from .. import view
    console = Console(highlight=False, soft_wrap=False)
    terminal = console.is_terminal
    # Bars longer than ~60 columns read no better; keep them short on wide terminals.
    rows = view.histogram_rows(class_counts, min(console.width, 72) - len(indent) - 1,
                               ascii=not terminal)
    for label, bar, count in rows:
        if terminal:
            from rich.text import Text
            console.print(Text.assemble(indent, label, " ", (bar, "cyan"), " ", count))
        else:
            click.echo(f"{indent}{label} {bar} {count}")


def orientation_hint(split, transposed=False, quiet=False):
    """{looks_transposed, taller_share} for --json, and a hint on stderr when the
    images look transposed (EMNIST), or upright but read with --transpose."""
    from .. import view
    verdict, share = view.looks_transposed(split)
    if verdict:
        fix = ("they were read with --transpose: drop it" if transposed else
               "read with --transpose (show, convert, info, ...)")
        note(f"hint: {split.name}: images look transposed, as EMNIST's are (only "
             f"{100 * share:.0f}% of them are taller than wide, against about 90% for "
             f"upright handwriting); {fix}", quiet)
    return {"looks_transposed": verdict,
            "taller_share": None if share is None else round(share, 3)}
