"""preview: a contact sheet of a dataset (PNG, JPEG or WebP), one row per class."""

import click

from ..errors import UsageError
from .common import emit_json, note, run_options
from .inputs import one_split_options


@click.command()
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write the sheet, in the format its name says: .png, .jpg or "
                   ".jpeg (JPEG, quality 95), .webp (lossless); '-' for PNG on stdout.")
@one_split_options
@click.option("--per-class", type=click.IntRange(min=1), default=10, show_default=True,
              metavar="N", help="Images per class (per row).")
@click.option("--scale", type=click.IntRange(min=1, max=16), default=2, show_default=True,
              metavar="K", help="Each pixel becomes K x K (images wider or taller than "
                                "512/K keep every n-th pixel).")
@run_options("force", "quiet", "json")
def preview(source, output, per_class, scale, run):
    """Write a contact sheet of PATH (PNG, JPEG or WebP): one row per class, the class on the left, the
    first N images of that class (in file order) with each one's original index under it.

    \b
    Examples:
      mnistconv preview data/mnist -o sheet.png
      mnistconv preview data/mnist --split test --per-class 20 --scale 1 -o test.png
      mnistconv preview data/mnist -o sheet.webp
    """
    from ..views import view
    from ..io.fileio import StagedOutput, open_staged, output_file_info
    path, force, quiet, as_json = source.path, run.force, run.quiet, run.as_json
    if output == "-" and as_json:
        raise UsageError(None, "--json prints on stdout, which '-' uses for the PNG",
                         "write the PNG to a file with -o, or drop --json")
    ext = view.sheet_format(output)
    if ext is None:
        # Before reading anything: a .gif would get bytes of another format.
        raise UsageError(output, "cannot tell the image format from the name",
                         "end it in .png, .jpg, .jpeg or .webp")
    split = source.split(quiet or as_json)
    groups = view.per_class_positions(split.labels(), per_class)
    if not groups:
        raise UsageError(path, f"split {split.name} holds no images to preview",
                         "preview another split (--split)")
    import numpy as np
    # One gather for the whole sheet, in increasing order (sequential for streams),
    # in pieces of the memory budget, large images cut to a cell of the sheet.
    wanted = np.unique(np.concatenate(list(groups.values())))
    try:
        images = view.gather(split, wanted, view.SHEET_CELL // scale, colour=True)
    except ValueError as e:
        raise UsageError(path, str(e), "preview draws gray or RGB(A) images of two "
                                       "dimensions") from None
    indices, names, rows = split.indices(), split.header.class_names, []
    for label, positions in groups.items():
        at = np.searchsorted(wanted, positions)
        name = view.class_name(names, label)
        rows.append((f"{label} {name}" if name else str(label), images[at],
                     [f"#{indices[p]}" for p in positions]))
    try:
        sheet, _ = view.contact_sheet(rows, scale)
    except ValueError as e:
        raise UsageError(path, str(e),
                         "preview one split of H x W images (1, 3 or 4 channels) with --split") from None
    data = view.encode_sheet(sheet, ext)
    kind = view.SHEET_FORMATS[ext][0]
    with StagedOutput(force) as staged:
        tmp = staged.file(output)
        with open_staged(tmp) as f:
            f.write(data)
        info = output_file_info(tmp)
    facts = {"path": output, "format": kind, "bytes": info.bytes, "sha256": info.sha256,
             "width": int(sheet.shape[1]), "height": int(sheet.shape[0]),
             "split": split.name, "classes": len(groups),
             "images": int(sum(len(p) for p in groups.values())),
             **({"class_names": list(names)} if names else {})}
    if as_json:
        emit_json(facts)
    elif output != "-":
        note(f"{output}: {facts['width']}x{facts['height']} {kind}, {facts['classes']} "
             f"classes x up to {per_class} images, {facts['bytes']:,} bytes", quiet)
    return 0
