"""show: draw a dataset's images in the terminal."""

import re

import click

from ..errors import UsageError
from ..limits import printable
from .common import note, run_options
from .inputs import one_split_options

DEFAULT_SHOW = 10


def parse_index(spec, count, path=None):
    """Positions from '0:20', '5', '-3:', '1,4,10:12' (Python slice rules); a single
    index outside the split is an error."""
    import numpy as np
    positions = []
    for part in spec.split(","):
        part = part.strip()
        # ASCII digits, at most 18: int() refuses over 4300, and no split is longer
        if not re.fullmatch(r"-?[0-9]{0,18}(:-?[0-9]{0,18}){0,2}", part) or not part:
            raise UsageError(None, f"--index {printable(spec)} is not a list of positions "
                                   "or ranges", "write e.g. 0:20 or 3,7,10:12")
        if ":" in part:
            bounds = [int(b) if b else None for b in part.split(":")]
            if len(bounds) == 3 and bounds[2] == 0:
                raise UsageError(None, f"--index {printable(spec)}: a step cannot be 0",
                                 "use a step of 1 or more, e.g. 0:100:2")
            positions.extend(range(count)[slice(*bounds)])
        else:
            i = int(part)
            if not -count <= i < count:
                raise UsageError(path, f"--index {i} is outside the split "
                                       f"({count} images)",
                                 "pass an index inside it (negative ones count from the end)")
            positions.append(i % count)
    return np.array(positions, dtype=np.int64)


def parse_grid(spec):
    """(COLS, ROWS) from --grid's 'COLSxROWS', e.g. '10x2' -> (10, 2)."""
    m = re.fullmatch(r"\s*([0-9]{1,18})\s*[xX]\s*([0-9]{1,18})\s*", spec or "")
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise UsageError(None, f"--grid {printable(spec)} is not COLSxROWS",
                         "write e.g. 10x2")
    return int(m.group(1)), int(m.group(2))


def _chosen(split, path, index, per_class, grid):
    """Positions to show (at most COLS x ROWS) and --grid's COLS and ROWS, or None."""
    import numpy as np
    from ..views import view
    if index is not None and per_class is not None:
        raise UsageError(None, "--index and --per-class choose images in different ways",
                         "give one of them")
    cols, rows = (None, None) if grid is None else parse_grid(grid)
    limit = None if rows is None else cols * rows
    # A split read through record indexes knows its count without reading it all.
    count = split.count if hasattr(split, "at") else split.header.count
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


@click.command()
@one_split_options
@click.option("--index", metavar="SPEC",
              help="Positions to draw: 0:20, 5, -3:, 1,4,10:12 (default: the first 10).")
@click.option("--per-class", type=click.IntRange(min=1), metavar="N",
              help="The first N images of each class, class by class.")
@click.option("--grid", metavar="COLSxROWS",
              help="At most COLS images per line (fewer if the terminal is narrower) "
                   "and ROWS lines of images.")
@click.option("--ascii", "force_ascii", is_flag=True,
              help="Plain ASCII shading even on a colour terminal.")
@run_options("quiet")
def show(source, index, per_class, grid, force_ascii, run):
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
    from ..views import view
    path, quiet = source.path, run.quiet
    split = source.split(quiet)
    positions, cols, rows = _chosen(split, path, index, per_class, grid)
    if index is not None and hasattr(split, "at"):  # read only those, by record index
        import numpy as np
        split, positions = split.at(positions), np.arange(len(positions))
    if len(positions) == 0:
        note(f"{path}: no images to show", quiet)
        return 0
    console = Console(highlight=False, soft_wrap=False)
    width = console.width
    labels = split.labels()[positions]
    indices = split.indices()[positions]
    try:  # cut to the terminal's width as they are gathered (the drawing would anyway)
        images = view.gather(split, positions, width, width_only=True)
    except ValueError as e:
        raise UsageError(path, str(e),
                         "show one split of H x W images (1, 3 or 4 channels) with --split") from None
    names = split.header.class_names
    captions = [view.caption(lab.item(), i.item(), view.class_name(names, lab.item()))
                for lab, i in zip(labels, indices)]
    if rows is not None:  # ROWS lines: fewer images when fewer than COLS tiles fit a line
        keep = view.tiles_per_line(images, captions, width, cols) * rows
        images, captions = images[:keep], captions[:keep]
    colour = (console.is_terminal and not console.no_color
              and console.color_system is not None and not force_ascii)
    if colour:
        console.print(view.render_blocks(images, captions, width, cols), end="")
    else:
        click.echo(view.render_ascii(images, captions, width, cols), nl=False)
    return 0
