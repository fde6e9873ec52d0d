"""Seeing the data: images as terminal text, contact sheets, and an orientation check.
A terminal cell holds two pixel rows (the upper half block U+2580, upper pixel as
foreground), so a digit keeps its proportions; without colour they become one ASCII
shading character. Sheets are labelled in a built-in 3x5 bitmap font. Nothing prints.
"""

import numpy as np

from ..io import budget

UPPER_HALF = "\u2580"
ASCII_RAMP = " .:-=+*#%@"  # dark to bright: MNIST's black background stays empty
GAP = 2  # spaces between terminal tiles

# 3x5 glyphs, '#' on. Enough for class numbers, indices and short letter labels.
_GLYPHS = {
    "0": "### #.# #.# #.# ###", "1": ".#. ##. .#. .#. ###", "2": "### ..# ### #.. ###",
    "3": "### ..# .## ..# ###", "4": "#.# #.# ### ..# ..#", "5": "### #.. ### ..# ###",
    "6": "### #.. ### #.# ###", "7": "### ..# .#. .#. .#.", "8": "### #.# ### #.# ###",
    "9": "### #.# ### ..# ###",
    "A": ".#. #.# ### #.# #.#", "B": "##. #.# ##. #.# ##.", "C": ".## #.. #.. #.. .##",
    "D": "##. #.# #.# #.# ##.", "E": "### #.. ##. #.. ###", "F": "### #.. ##. #.. #..",
    "G": ".## #.. #.# #.# .##", "H": "#.# #.# ### #.# #.#", "I": "### .#. .#. .#. ###",
    "J": "..# ..# ..# #.# .#.", "K": "#.# #.# ##. #.# #.#", "L": "#.. #.. #.. #.. ###",
    "M": "#.# ### ### #.# #.#", "N": "##. #.# #.# #.# #.#", "O": ".#. #.# #.# #.# .#.",
    "P": "##. #.# ##. #.. #..", "Q": ".#. #.# #.# ##. .##", "R": "##. #.# ##. #.# #.#",
    "S": ".## #.. .#. ..# ##.", "T": "### .#. .#. .#. .#.", "U": "#.# #.# #.# #.# ###",
    "V": "#.# #.# #.# #.# .#.", "W": "#.# #.# ### ### #.#", "X": "#.# #.# .#. #.# #.#",
    "Y": "#.# #.# .#. .#. .#.", "Z": "### ..# .#. #.. ###",
    "#": "#.# ### #.# ### #.#", "-": "... ... ### ... ...", ":": "... .#. ... .#. ...",
    ".": "... ... ... ... .#.", " ": "... ... ... ... ...", "?": "### ..# .## ... .#.",
}
FONT = {ch: np.array([[c == "#" for c in row] for row in rows.split()], bool)
        for ch, rows in _GLYPHS.items()}
GLYPH_W, GLYPH_H = 3, 5


def to_gray_uint8(images) -> np.ndarray:
    """n x H x W uint8 for display, from n x H x W, n x H x W x C or n x C x H x W (C of
    1, or 3/4 as luminance) or n x K*K flat vectors. Floats in [0, 1] are scaled by 255
    (the --float convention); other values are clipped to 0..255."""
    images = np.asarray(images)
    if images.ndim == 4:
        axis = _channel_axis(images.shape[1:])
        if axis is None:
            raise ValueError(f"cannot display images of shape {images.shape[1:]}")
        channels_last = images if axis == -1 else np.moveaxis(images, 1, -1)
        images = channels_last[..., 0] if channels_last.shape[-1] == 1 else \
            channels_last[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    elif images.ndim == 2:  # flat vectors are drawn square when their length is one
        side = int(round(images.shape[1] ** 0.5))
        if side == 0 or side * side != images.shape[1]:
            raise ValueError(f"cannot display images of shape {images.shape[1:]}")
        images = images.reshape(len(images), side, side)
    elif images.ndim != 3:
        raise ValueError(f"cannot display images of shape {images.shape[1:]}")
    if images.dtype == np.uint8:
        return images
    values = images.astype(np.float64)
    if images.dtype.kind == "f" and values.size and np.nanmax(values) <= 1.0:
        values = values * 255.0
    return np.clip(np.nan_to_num(values), 0, 255).round().astype(np.uint8)


def to_display_uint8(images, colour=False) -> np.ndarray:
    """to_gray_uint8's images, or with colour=True RGB images as n x H x W x 3 uint8 (an
    alpha channel dropped, floats in [0, 1] scaled as there); grey ones stay n x H x W."""
    images = np.asarray(images)
    if colour and images.ndim == 4:
        axis = _channel_axis(images.shape[1:])
        channels_last = images if axis == -1 else np.moveaxis(images, 1, -1)
        if axis is not None and channels_last.shape[-1] in (3, 4):
            rgb = np.ascontiguousarray(channels_last[..., :3])
            n, h, w, _ = rgb.shape
            # Each channel as a grey image: the same scaling and clipping.
            planes = to_gray_uint8(rgb.transpose(0, 3, 1, 2).reshape(n * 3, h, w))
            return np.ascontiguousarray(planes.reshape(n, 3, h, w).transpose(0, 2, 3, 1))
    return to_gray_uint8(images)


def _channel_axis(shape):
    """-1 for H x W x C, 0 for C x H x W, else None; 1 x 3 x 4 is a 3x4 image, not RGBA."""
    if shape[-1] == 1 or (shape[0] != 1 and shape[-1] in (3, 4)):
        return -1
    return 0 if shape[0] in (1, 3, 4) else None


def _spatial(shape):
    """The two pixel axes of one image of `shape` as to_gray_uint8 reads it (None: flat)."""
    if len(shape) == 2:
        return 0, 1
    axis = _channel_axis(shape) if len(shape) == 3 else None
    return None if axis is None else ((0, 1) if axis == -1 else (1, 2))


def gather(split, positions, max_side=None, width_only=False, colour=False) -> np.ndarray:
    """The images at `positions` as n x H x W uint8 for display (n x H x W x 3 for RGB
    with colour=True), read a budget at a time, each piece cut to at most `max_side`
    pixels a side (of width with width_only)."""
    positions = np.asarray(positions, dtype=np.int64)
    shape = tuple(split.header.shape)
    axes = _spatial(shape)
    step = 1
    if max_side and axes is not None:
        side = shape[axes[1]] if width_only else max(shape[axes[0]], shape[axes[1]])
        step = -(-max(side, 1) // max(1, max_side))
    wanted = np.unique(positions)
    parts = []
    for images in _pieces(split, wanted):
        if step > 1:
            cut = [slice(None)] * images.ndim
            cut[1 + axes[0]] = cut[1 + axes[1]] = slice(None, None, step)
            images = images[tuple(cut)]
        # A copy of the cut, so no part keeps a whole batch alive.
        parts.append(np.array(to_display_uint8(np.ascontiguousarray(images), colour)))
        del images  # the piece goes before the next is read
    if not parts:
        return to_display_uint8(np.zeros((0,) + shape, split.header.dtype), colour)
    return np.concatenate(parts)[np.searchsorted(wanted, positions)]


def _pieces(split, wanted):
    """The images at sorted `wanted`, a budget at a time (Split.take would spool all)."""
    rows = budget.rows(split.header)
    if not len(wanted):
        return
    if split.can_seek:  # a reader's own take(), through the wrappers
        for start, stop in budget.spans(len(wanted), rows):
            yield np.asarray(split.take(wanted[start:stop]))
        return
    at = 0
    batches = split.batches(rows)
    for batch in batches:
        if at > wanted[-1]:
            break
        images, n, batch = np.asarray(batch.images), len(batch.labels), None
        for k in (wanted[(wanted >= at) & (wanted < at + n)] - at).tolist():
            yield images[k:k + 1]
        at, images = at + n, None
    batches.close()


def _pair_rows(image):
    """(top, bottom) rows of an image padded with black to an even height."""
    if image.shape[0] % 2:
        image = np.vstack([image, np.zeros((1, image.shape[1]), image.dtype)])
    return image[0::2], image[1::2]


def caption(label, index, name=None) -> str:
    """The text under a tile: `7 #1234`, or `3 Dress #12` with a class name."""
    return f"{label} {name} #{index}" if name else f"{label} #{index}"


def class_name(names, label):
    """The name of a label in a header's class_names, or None (unknown, out of range)."""
    return names[label] if isinstance(label, int) and 0 <= label < len(names) else None


def _layout(images, captions, width, columns):
    """Shrunk images (every k-th pixel), tile width and tiles per terminal line."""
    step = -(-images.shape[2] // max(1, width))
    images = images[:, ::step, ::step] if step > 1 else images
    tile = min(max([images.shape[2]] + [len(c) for c in captions]), max(1, width))
    fit = max(1, (width + GAP) // (tile + GAP))
    return images, tile, max(1, min(fit, columns) if columns else fit)


def tiles_per_line(images, captions, width=80, columns=None) -> int:
    """How many tiles the renderers put on a line: as many as fit `width`, at most `columns`."""
    return _layout(np.asarray(images), captions, width, columns)[2]


def _ascii_lines(image):
    top, bottom = _pair_rows(image.astype(np.uint16))
    levels = ((top + bottom) * len(ASCII_RAMP)) // 512
    return ["".join(ASCII_RAMP[v] for v in row) for row in levels]


def render_ascii(images, captions, width=80, columns=None) -> str:
    """Plain-text grid: one shading character per pixel column and pair of rows,
    captions under each image, tiles wrapped to `width` (at most `columns` per line)."""
    images, tile, cols = _layout(to_gray_uint8(images), captions, width, columns)
    out = []
    for start in range(0, len(images), cols):
        group = range(start, min(start + cols, len(images)))
        tiles = [_ascii_lines(images[i]) + [captions[i][:tile]] for i in group]
        for line in zip(*tiles):
            out.append((" " * GAP).join(part.ljust(tile) for part in line).rstrip())
        out.append("")
    return "\n".join(out[:-1]) + "\n" if out else ""


def render_blocks(images, captions, width=80, columns=None):
    """The same grid as a rich Text of grayscale half blocks."""
    from functools import cache
    from itertools import groupby
    from rich.color import Color
    from rich.style import Style
    from rich.text import Text

    images, tile, cols = _layout(to_gray_uint8(images), captions, width, columns)

    @cache
    def style(t, b):
        return Style(color=Color.from_rgb(t, t, t), bgcolor=Color.from_rgb(b, b, b))

    text = Text(no_wrap=True, overflow="crop", end="")
    for start in range(0, len(images), cols):
        group = list(range(start, min(start + cols, len(images))))
        pairs = [_pair_rows(images[i]) for i in group]
        for row in range(len(pairs[0][0])):
            for k, i in enumerate(group):
                if k:
                    text.append(" " * GAP)
                top, bottom = pairs[k][0][row], pairs[k][1][row]
                # A run of equal cells is one span: one escape sequence, not one per cell.
                for cell, run in groupby(zip(top.tolist(), bottom.tolist())):
                    text.append(UPPER_HALF * len(list(run)), style(*cell))
                text.append(" " * (tile - len(top)))
            text.append("\n")
        labels = (" " * GAP).join(captions[i][:tile].ljust(tile) for i in group)
        text.append(labels.rstrip() + "\n")
        if start + cols < len(images):
            text.append("\n")
    return text


_EIGHTHS = " \u258f\u258e\u258d\u258c\u258b\u258a\u2589"  # left blocks 1/8 .. 7/8


def histogram_rows(class_counts, width=80, ascii=False):
    """(label, bar, count) per class, padded so "label bar count" fits `width`; the largest
    class fills the bar's space (in eighths of a character, or '#' with ascii)."""
    if not class_counts:
        return []
    labels = [str(c) for c in class_counts]
    counts = [int(n) for n in class_counts.values()]
    lw, nw = max(map(len, labels)), max(len(str(n)) for n in counts)
    room = max(1, width - lw - nw - 2)
    top = max(counts) or 1
    rows = []
    for label, n in zip(labels, counts):
        eighths = round(n * room * 8 / top)
        bar = "#" * round(eighths / 8) if ascii else \
            "\u2588" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")
        rows.append((label.rjust(lw), bar.ljust(room), str(n).rjust(nw)))
    return rows


def histogram_lines(class_counts, width=80, ascii=False):
    """A bar chart of examples per class as lines of text (see histogram_rows)."""
    return [" ".join(row) for row in histogram_rows(class_counts, width, ascii)]


SHEET_CELL = 512  # the largest image side a sheet shows (larger: every k-th pixel)
BACKGROUND = 48  # margins: dark grey, so black image backgrounds show their edges
INK = 230


def text_size(text, scale=1):
    """(height, width) in pixels of text drawn with the built-in font."""
    return (GLYPH_H * scale, (len(text) * (GLYPH_W + 1) - 1) * scale) if text else (0, 0)


def draw_text(canvas, text, y, x, scale=1, value=INK):
    """Draw text (upper-case; '?' for no glyph) into a uint8 canvas at (y, x), clipped."""
    for k, ch in enumerate(str(text).upper()):
        block = np.kron(FONT.get(ch, FONT["?"]), np.ones((scale, scale), bool))
        gy, gx = y, x + k * (GLYPH_W + 1) * scale
        h = max(0, min(block.shape[0], canvas.shape[0] - gy))
        w = max(0, min(block.shape[1], canvas.shape[1] - gx))
        if h and w and gy >= 0 and gx >= 0:
            canvas[gy:gy + h, gx:gx + w][block[:h, :w]] = value


def contact_sheet(rows, scale=1):
    """(sheet, cells) from rows of (row label, images n x H x W or n x H x W x 3,
    captions): a uint8 array (H x W, or H x W x 3 when the images are RGB) with labels on
    the left and captions under the images, and for each image the (row, column, y, x,
    height, width) of its pixels (each repeated scale x scale)."""
    pad = 2 * scale
    label_scale, caption_scale = 2 * scale, max(1, scale // 2)
    prepared = [(str(label), to_display_uint8(images, True), list(captions))
                for label, images, captions in rows]
    shapes = {im.shape[1:] for _, im, _ in prepared if len(im)}
    if len(shapes) > 1:
        raise ValueError(f"images of different shapes: {sorted(shapes)}")
    h, w, *rgb = shapes.pop() if shapes else (0, 0)
    img_h, img_w = h * scale, w * scale
    all_captions = [c for _, _, caps in prepared for c in caps]
    cell_w = max([img_w] + [text_size(c, caption_scale)[1] for c in all_captions])
    caption_h = GLYPH_H * caption_scale if all_captions else 0
    label_w = max([text_size(label, label_scale)[1] for label, _, _ in prepared] + [0])
    row_h = img_h + pad + caption_h
    per_row = max([len(im) for _, im, _ in prepared] + [0])
    left = pad + label_w + pad
    sheet = np.full((max(pad + len(prepared) * (row_h + pad), 1),
                     max(left + per_row * (cell_w + pad), 1)) + tuple(rgb), BACKGROUND,
                    np.uint8)
    cells = []
    for r, (label, images, captions) in enumerate(prepared):
        top = pad + r * (row_h + pad)
        draw_text(sheet, label, top + (img_h - GLYPH_H * label_scale) // 2, pad,
                  label_scale)
        for c, image in enumerate(images):
            x0 = left + c * (cell_w + pad)
            x = x0 + (cell_w - img_w) // 2
            sheet[top:top + img_h, x:x + img_w] = image.repeat(scale, 0).repeat(scale, 1)
            cells.append((r, c, top, x, img_h, img_w))
            if c < len(captions):
                tw = text_size(captions[c], caption_scale)[1]
                draw_text(sheet, captions[c], top + img_h + pad, x0 + (cell_w - tw) // 2,
                          caption_scale)
    return sheet, cells


# By extension: (format name, Pillow format, options). JPEG at OpenCV's default quality.
SHEET_FORMATS = {
    ".png": ("PNG", "PNG", {}),
    ".jpg": ("JPEG", "JPEG", {"quality": 95}),
    ".jpeg": ("JPEG", "JPEG", {"quality": 95}),
    ".webp": ("WebP", "WEBP", {"lossless": True, "quality": 100, "method": 4}),
}


def sheet_format(path):
    """The SHEET_FORMATS key for an output name ('-' is PNG), or None."""
    name = str(path).lower()
    return ".png" if name == "-" else next((e for e in SHEET_FORMATS if name.endswith(e)), None)


def encode_sheet(sheet, ext) -> bytes:
    """A sheet (2-D uint8, or H x W x 3 RGB) as bytes of a SHEET_FORMATS format, with
    no metadata."""
    import io
    from ..codecs import check_2d_uint8, pil_image
    _, kind, options = SHEET_FORMATS[ext]
    out = io.BytesIO()
    if sheet.ndim == 3 and sheet.shape[2] == 3 and sheet.dtype == np.uint8:
        image = pil_image().fromarray(np.ascontiguousarray(sheet), "RGB")
    else:
        image = pil_image().fromarray(check_2d_uint8(sheet), "L")
    image.save(out, kind, **options)
    return out.getvalue()


def per_class_positions(labels, per_class):
    """{class: the first `per_class` positions of that class (or fewer)}, classes in order."""
    labels = np.asarray(labels)
    return {c.item(): np.flatnonzero(labels == c)[:per_class] for c in np.unique(labels)}


def taller_share(images):
    """(share, number counted): among images whose ink (over half the image's maximum) is
    not square, the share taller than wide, as handwriting is unless stored transposed."""
    images = to_gray_uint8(images)
    if images.size == 0:  # no images, or images without pixels (a 3 x 0 x 28 header)
        return None, 0
    peak = images.reshape(len(images), -1).max(axis=1)
    ink = images > (peak // 2)[:, None, None]
    rows, cols = ink.any(axis=2), ink.any(axis=1)

    def extent(mask):
        first = mask.argmax(axis=1)
        last = mask.shape[1] - 1 - mask[:, ::-1].argmax(axis=1)
        return np.where(mask.any(axis=1), last - first + 1, 0)

    tall, wide = extent(rows), extent(cols)
    taller, wider = int((tall > wide).sum()), int((wide > tall).sum())
    counted = taller + wider
    return (taller / counted if counted else None), counted


# A hint, not a verdict (upright MNIST is near 0.9, transposed near 0.1: test_view.py).
TRANSPOSED_BELOW = 0.3
MIN_COUNTED = 20


def looks_transposed(split, sample=2000):
    """(verdict, share) from a split's first `sample` images: True when they look
    transposed (as EMNIST's are), None when they are not 2-D or too few to say."""
    shape = tuple(split.header.shape)
    if not (len(shape) == 2 or (len(shape) == 3 and 1 in (shape[0], shape[-1]))):
        return None, None
    # At most a quarter of the budget: images larger than that are not handwriting.
    n = min(sample, split.header.count,
            (budget.BATCH_BYTES // 4) // budget.image_bytes(shape, split.header.dtype))
    if n == 0:
        return None, None
    parts, have = [], 0
    for batch in split.batches(n):
        parts.append(batch.images[:n - have])
        have += len(parts[-1])
        if have >= n:
            break
    share, counted = taller_share(np.concatenate(parts))
    if share is None or counted < MIN_COUNTED:
        return None, share
    return share < TRANSPOSED_BELOW, share
