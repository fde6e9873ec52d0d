"""A local HTTP server for a directory: a browser pack, or a demo page with a pack
inside (examples/browser). Nothing here is specific to packs beyond the content types:
.bin.gz is sent as application/gzip with no Content-Encoding, so the page receives the
gzip bytes untouched and decompresses them itself (DecompressionStream("gzip")).
"""

import errno
import functools
import os

from .errors import UsageError

_FIX_PORT = "choose another with --port (--port 0 picks a free one)"


def make_server(directory, host="127.0.0.1", port=8000, log=None):
    """An HTTP server for DIRECTORY on host:port (port 0: any free one). It sends .bin.gz
    as application/gzip with no Content-Encoding, so the page gets the gzip bytes and
    decompresses them itself; and nothing is cached, so a rebuilt pack is seen. Each
    request is handed to `log` as one line when given. Returns the bound (not yet
    serving) http.server.ThreadingHTTPServer; the caller runs and closes it.

    Example:
        server = make_server("examples/browser", port=0)
        print(server.server_address)          # ('127.0.0.1', 43817)
        try:
            server.serve_forever()
        finally:
            server.server_close()
    """
    # Imported here: http.server pulls in email, html and mimetypes, which `pack` and
    # `verify` (same CLI module) do not need.
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    if not os.path.isdir(directory):
        raise UsageError(directory, "is not a directory")

    class Handler(SimpleHTTPRequestHandler):
        extensions_map = {**SimpleHTTPRequestHandler.extensions_map,
                          ".js": "text/javascript", ".mjs": "text/javascript",
                          ".json": "application/json", ".bin": "application/octet-stream",
                          ".gz": "application/gzip", ".html": "text/html"}

        def end_headers(self):
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, fmt, *args):
            if log:
                log(f"{self.address_string()} {fmt % args}")

    handler = functools.partial(Handler, directory=os.path.abspath(directory))
    try:
        return ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(None, f"port {port} on {host} is already in use",
                             _FIX_PORT) from None
        if e.errno == errno.EACCES:
            raise UsageError(None, f"not allowed to listen on port {port} on {host} "
                                   "(ports below 1024 need privileges)", _FIX_PORT) \
                from None
        raise
