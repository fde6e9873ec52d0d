"""The dataset card's page (card.py gathers what it shows): one HTML file that needs
nothing else (style inline, images as data: URIs, no script, no link: its CSP is
default-src 'none'); every text from the data escaped. Each split is a <section
class="split" data-split="NAME"> with its count (data-count), a row per class (data-label)."""

import base64
import html

import numpy as np

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;background:#fff}
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 8px;text-align:left;
vertical-align:middle}th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:
tabular-nums}.bar{background:#4a7bd0;height:12px}.bars{width:200px}
img{image-rendering:pixelated;width:42px;height:42px;margin:1px;border:1px solid #ddd}
img.mean{border-color:#4a7bd0}code{font-size:12px;word-break:break-all}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _png_uris(images) -> list:
    """data: URIs of same-sized grayscale images, encoded together (numpy PNG encoder)."""
    if not len(images):
        return []
    from ..codecs.png import encode_batch
    data, offsets = encode_batch(np.stack(images))
    return ["data:image/png;base64," + base64.b64encode(data[a:b]).decode("ascii")
            for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def _img(uri, css, alt) -> str:
    return f'<img class="{css}" src="{uri}" alt="{_e(alt)}">'


def render(stats, title, files=None, conversion=None, identity=None, notes=()) -> str:
    """The page: stats {split: card.SplitStats}; files (rows, more, more_bytes); conversion
    {input, input_format, output, output_format, options, stats}; an identity.Identity.
    A URL's password is shown as *** wherever the page names the URL."""
    from ..errors import redact
    title, notes = redact(title), [redact(n) for n in notes]
    if conversion:
        conversion = {**conversion, "input": redact(conversion["input"]),
                      "output": redact(conversion["output"]),
                      "options": {k: redact(v) if isinstance(v, str) else v
                                  for k, v in (conversion.get("options") or {}).items()}}
    out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
           '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
           'img-src data:; style-src \'unsafe-inline\'">',
           f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
           f'<h1 id="title">{_e(title)}</h1>']
    total = sum(s.count for s in stats.values())
    out.append(f'<p id="summary">{len(stats)} split(s), {total:,} examples: ' +
               ", ".join(f"{_e(n)} {s.count:,}" for n, s in stats.items()) + "</p>")
    if identity is not None:
        out.append(_identity(identity))
    if conversion:
        out.append(_conversion(conversion))
    out += [f'<p class="note">Note: {_e(note)}</p>' for note in notes]
    out += [_split(name, s) for name, s in stats.items()]
    if files is not None:
        out.append(_files(*files))
    out.append("</body></html>\n")
    return "\n".join(out)


def _identity(i):
    """What the dataset is, as identity.py resolved it (given, or proved by checksum)."""
    parts = ['<section id="identity"><h2>Dataset</h2>',
             f'<p><span id="name">{_e(i.name)}</span>'
             + (f' (<code id="homepage">{_e(i.homepage)}</code>)' if i.homepage else "")
             + "</p>", f'<p id="description">{_e(i.description)}</p>']
    if i.version:
        parts.append(f'<p>Version: <code id="version">{_e(i.version)}</code></p>')
    if i.date_published:
        parts.append(f'<p>Published: <code id="date-published">{_e(i.date_published)}'
                     "</code></p>")
    if i.license:
        parts.append(f'<p>License: <code id="license">{_e(i.license)}</code></p>')
    if i.citation:
        parts.append(f'<p>Cite as:</p><pre id="citation">{_e(i.citation)}</pre>')
    return "".join(parts) + "</section>"


def _conversion(c):
    rows = [("Converted from", f"<code>{_e(c['input'])}</code> ({_e(c['input_format'])})"),
            ("To", f"<code>{_e(c['output'])}</code> ({_e(c['output_format'])})")]
    rows.append(("Options", ", ".join(f"<code>{_e(k)}={_e(_value(v))}</code>"
                                      for k, v in (c.get("options") or {}).items())
                  or "defaults"))
    rows += [(key.replace("_", " "), f'<span data-stat="{_e(key)}">{_e(value)}</span>')
             for key, value in (c.get("stats") or {}).items()]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<section id="conversion"><h2>Conversion</h2><table>{body}</table></section>'


def _value(v):
    if isinstance(v, dict):  # split_off={"validation": 0.1}: as --split-off spells it
        return ",".join(f"{k}={x}" for k, x in v.items())
    return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else v


def _split(name, s):
    h = s.header
    shape = "x".join(map(str, h.shape))
    out = [f'<section class="split" data-split="{_e(name)}" id="split-{_e(name)}">',
           f"<h2>{_e(name)}</h2>",
           f'<p class="count" data-count="{s.count}">{s.count:,} examples, {_e(shape)} '
           f"{_e(h.dtype)}</p>"]
    names = tuple(h.class_names)
    means = s.means()
    # Every image of the split at once: the means, then each class's samples.
    shown = list(means.values()) + [im for label in sorted(s.samples)
                                    for im in s.samples[label]]
    uris = iter(_png_uris(shown))
    mean_uris = {label: next(uris) for label in means}
    sample_uris = {label: [next(uris) for _ in s.samples[label]]
                   for label in sorted(s.samples)}
    top = int(s.class_counts.max()) if len(s.class_counts) else 0
    rows = ['<table class="classes"><tr><th>label</th><th>name</th><th>count</th>'
            '<th class="bars">histogram</th><th>mean</th>'
            f"<th>first {s.shown}</th></tr>"]
    for label, n in enumerate(s.class_counts.tolist()):
        if not n:
            continue
        cname = names[label] if label < len(names) else ""
        width = round(200 * n / top) if top else 0
        mean = _img(mean_uris[label], "mean", f"mean of class {label}") \
            if label in mean_uris else ""
        samples = "".join(_img(uri, "sample", f"class {label}")
                          for uri in sample_uris.get(label, []))
        rows.append(f'<tr class="class" data-label="{label}"><td class="n">{label}</td>'
                    f'<td class="name">{_e(cname)}</td><td class="n">{n:,}</td>'
                    f'<td class="bars"><div class="bar" style="width:{width}px"></div></td>'
                    f"<td>{mean}</td><td>{samples}</td></tr>")
    out.append("".join(rows) + "</table>")
    if s.means_dropped:
        out.append('<p class="note">Mean images left out: too many classes x pixels.</p>')
    stats = s.pixel_stats()
    if stats:
        cells = "".join(f'<th>{k}</th><td class="n" data-pixel="{k}">{v}</td>'
                        for k, v in stats.items())
        out.append(f'<table class="pixels"><tr><th colspan="8">pixel values</th></tr>'
                   f"<tr>{cells}</tr></table>")
    return "".join(out) + "</section>"


def _files(rows, more, more_bytes):
    body = "".join(f'<tr class="file"><td><code>{_e(p)}</code></td><td class="n">'
                   f"{size:,}</td><td><code>{_e(digest)}</code></td></tr>"
                   for p, size, digest in rows)
    tail = f"<p>... and {more:,} more files, {more_bytes:,} bytes.</p>" if more else ""
    return (f'<section id="files"><h2>Files</h2><table><tr><th>path</th><th>bytes</th>'
            f"<th>SHA-256</th></tr>{body}</table>{tail}</section>")
