"""Hostile remote listings: an HTTP server on 127.0.0.1 (HostileSite) that serves a folder
whose listing pages hold links of the server's choosing besides its real files: path
traversal (`../../evil`, %-encoded, absolute, full URLs), names no file system takes
(NUL, backslashes, drive letters, 300 characters), self links, sort links, a folder
that nests without end, and bodies that trickle a byte at a time. Any path the server
does not hold is answered with EVIL bytes, as a hostile server would, so a client
that followed a link out would write them somewhere.

The long pass (`make fuzz`) gives every reader the family "listing": a copy of one of
its seeds served over HTTP (hostile.Case path = the folder's URL), with one to three
hostile links; the runner then checks what it checks for every case (one line, no
traceback, nothing written outside out/, no hang). tests/test_remote_safety.py uses
HostileSite for its exact-message tests.
"""

import http.server
import os
import threading
import time
from urllib.parse import quote, unquote

EVIL = b"EVIL bytes a hostile server sent"

# Links that must be refused (exit 1) when a folder's listing holds them; `{top}` is
# the case's own top folder (absolute, so a client that followed it writes under it).
REFUSED = ["../../evil", "../../../../../../../../../..{top}/evil", "%2e%2e/%2e%2e/evil",
           "..%2F..%2Fevil", "sub/../../../evil", "a/../../../../evil", "./", "./evil",
           "..%5C..%5Cevil", "evil%00x", "ev%0Ail", "C:evil", "%2e%2e", "x" * 300,
           "{folder}../../evil", "{url}../../evil", "{url}%2e%2e/evil"]
# Links a listing may hold that name no file: skipped, the files read as without them.
SKIPPED = ["?C=N;O=D", "?C=M;O=A", "#top", "../", "..", "/", "http://elsewhere.invalid/x"]


class HostileSite:
    """An HTTP server on 127.0.0.1 (a thread of this process) for one folder at a time:
    serve(root, ...) returns the folder's URL; `links` maps a folder (relative, '' for
    the top) to extra links its listing holds, `{top}`, `{folder}` and `{url}` in them
    replaced by the case's top folder, the folder's path on the server and its URL."""

    def __init__(self):
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                site._answer(self, body=False)

            def do_GET(self):
                site._answer(self, body=True)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.root, self.links, self.top = None, {}, ""
        self.trickle = self.nest = False
        self.served = 0
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve(self, root, links=None, top="", trickle=False, nest=False):
        """Serve root (a folder) from now on; its URL, ending in '/'."""
        self.served += 1
        self.prefix = f"/site{self.served}/"
        self.root, self.links, self.top = str(root), links or {}, str(top)
        self.trickle, self.nest = trickle, nest
        return self.base + self.prefix

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, handler, body):
        path = handler.path.split("?", 1)[0].split("#", 1)[0]
        if self.root is not None and path == self.prefix.rstrip("/"):
            return self._redirect(handler, self.prefix)
        if self.root is None or not path.startswith(self.prefix):
            return self._send(handler, 200, "application/octet-stream", EVIL, body)
        relative = unquote(path[len(self.prefix):])
        while self.nest and "again/" in relative:  # a folder that holds itself
            relative = relative.replace("again/", "", 1)
        local = os.path.normpath(os.path.join(self.root, relative))
        if not (local + os.sep).startswith(self.root.rstrip(os.sep) + os.sep) or \
                not os.path.exists(local):
            return self._send(handler, 200, "application/octet-stream", EVIL, body)
        if os.path.isdir(local):
            if not path.endswith("/"):  # as http.server and real servers do
                return self._redirect(handler, path + "/")
            folder = os.path.relpath(local, self.root).replace(os.sep, "/")
            folder = "" if folder == "." else folder + "/"
            return self._send(handler, 200, "text/html", self._page(folder), body)
        with open(local, "rb") as f:
            data = f.read()
        return self._send(handler, 200, "application/octet-stream", data, body)

    def _page(self, folder):
        local = os.path.join(self.root, folder)
        names = [quote(n) + ("/" if os.path.isdir(os.path.join(local, n)) else "")
                 for n in sorted(os.listdir(local))]
        where = {"top": self.top, "folder": self.prefix + folder,
                 "url": self.base + self.prefix + folder}
        extra = [link.format(**where) for link in self.links.get(folder.rstrip("/"), [])]
        if self.nest:
            extra.append("again/")
        items = "".join(f'<a href="{link}">{link}</a>\n' for link in names + extra)
        return f"<html><body>\n{items}</body></html>\n".encode("utf-8", "surrogateescape")

    def _redirect(self, handler, where):
        handler.send_response(301)
        handler.send_header("Location", where)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def _send(self, handler, status, kind, data, body):
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if not body:
            return
        try:
            if not self.trickle:
                handler.wfile.write(data)
                return
            for i in range(len(data)):  # a byte at a time, until the client leaves
                handler.wfile.write(data[i:i + 1])
                handler.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass


_site = None


def site():
    """This process's HostileSite, started on first use."""
    global _site
    if _site is None:
        _site = HostileSite()
    return _site


def listing(rng, work, top, reader):
    """A seed of `reader` served over HTTP with hostile links in its listings; the case
    is the folder's URL."""
    try:  # here: hostile.py imports this module
        from .hostile import Case
        from .hostile_formats import _copy
    except ImportError:
        from hostile import Case
        from hostile_formats import _copy
    seed = _copy(rng, reader, work)
    root = seed if os.path.isdir(seed) else os.path.dirname(seed)
    folders = [""] + sorted(os.path.relpath(f, root).replace(os.sep, "/")
                            for f, _, _ in os.walk(root) if f != root)
    how = rng.choice(["refused", "refused", "refused", "skipped", "nest", "trickle"])
    links = {}
    for _ in range(rng.randint(1, 3)):
        pool = REFUSED if how == "refused" else SKIPPED
        links.setdefault(rng.choice(folders), []).append(rng.choice(pool))
    if how == "refused" and "" not in links:
        links[""] = [rng.choice(REFUSED)]  # seen first, whatever else the walk meets
    url = site().serve(root, links if how in ("refused", "skipped") else {}, top,
                       trickle=how == "trickle", nest=how == "nest")
    expect = {"refused": (1,), "nest": (2,), "trickle": (1,)}.get(how)
    return Case(url, f"{how} listing" + (f" {links}" if how in ("refused", "skipped")
                                          else ""), expect_code=expect,
                extra_args=["--timeout", "1"] if how == "trickle" else [])


def _builder(reader):
    return lambda rng, work, top: listing(rng, work, top, reader)


READERS = ["arrayrecord", "caffe-hdf5", "caffe-lmdb", "cifar", "cifar-python", "gdmnist",
           "idx", "imagefolder", "kmnist", "medmnist", "npz", "parquet", "quickdraw", "svhn",
           "tfds", "tfrecord", "webdataset"]
FAMILIES = {"listing": {reader: _builder(reader) for reader in READERS}}
