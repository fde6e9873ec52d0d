"""A local HTTP server for a directory: a browser pack, or a demo page with one inside.
It serves the folder and nothing else: regular files and folders under it (a link may
point only inside it; a FIFO, device or socket is neither listed nor opened), only to
requests addressed to localhost, 127.0.0.1 or [::1] with its port (a page that rebinds
its own name to 127.0.0.1 is refused), at most MAX_CONNECTIONS at once, each dropped
after CONNECTION_TIMEOUT seconds of silence or REQUEST_DEADLINE seconds in all (a client
sending or reading a byte at a time holds its slot no longer). Its log escapes control
characters (a request line cannot write escape sequences to the terminal).
"""

import errno
import functools
import io
import os

from ..errors import MnistconvError, UsageError
from ..io.fileio import input_entries, open_input

_FIX_PORT = "choose another with --port (--port 0 picks a free one)"
MAX_CONNECTIONS = 32
CONNECTION_TIMEOUT = 30
# A connection's whole time, request and answer: a drip of one byte within each
# CONNECTION_TIMEOUT would otherwise hold a slot for ever. Far above what a browser on
# this machine needs for the largest pack.
REQUEST_DEADLINE = 120
# C0 and C1 control characters and DEL, as \xNN in the log.
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7f, 0xa0)]}
_LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")


def make_server(directory, host="127.0.0.1", port=8000, log=None):
    """The bound (not yet serving) ThreadingHTTPServer for DIRECTORY on host:port (port
    0: any free one); the caller runs and closes it. .bin.gz goes as application/gzip
    with no Content-Encoding, so the page decompresses it itself (DecompressionStream);
    nothing is cached, so a rebuilt pack is seen; each request is one line to `log`.

        server = make_server("examples/browser", port=0)   # then serve_forever()
    """
    # Imported here: http.server pulls in modules `pack` and `verify` do not need.
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    if not os.path.isdir(directory):
        raise UsageError(directory, "is not a directory", "name the directory to serve")
    root = os.path.realpath(directory)

    class Handler(SimpleHTTPRequestHandler):
        extensions_map = {**SimpleHTTPRequestHandler.extensions_map,
                          ".js": "text/javascript", ".mjs": "text/javascript",
                          ".json": "application/json", ".bin": "application/octet-stream",
                          ".gz": "application/gzip", ".html": "text/html"}
        timeout = CONNECTION_TIMEOUT

        def setup(self):
            import threading
            # Cut the connection at its deadline: the handler's read or write fails.
            self.deadline = threading.Timer(REQUEST_DEADLINE, _cut, (self.request,))
            self.deadline.daemon = True
            self.deadline.start()
            super().setup()

        def finish(self):
            try:
                super().finish()
            finally:
                self.deadline.cancel()

        def parse_request(self):
            if not super().parse_request():
                return False
            port = self.server.server_address[1]
            allowed = {f"{name}:{port}" for name in _LOCAL_NAMES} | \
                (set(_LOCAL_NAMES) if port == 80 else set())
            if self.headers.get("Host", "").lower() not in allowed:
                # DNS rebinding: a page at evil.example resolved to 127.0.0.1 sends its name.
                self.send_error(403, "Host must be localhost, 127.0.0.1 or [::1] "
                                     f"with port {port}")
                return False
            return True

        def translate_path(self, path):
            from urllib.parse import quote, unquote
            # A name that is not UTF-8 (its listing links to its bytes): those bytes, as
            # os.listdir gives them (surrogates), which the stdlib's unquote would lose.
            path = path.split("?", 1)[0].split("#", 1)[0]
            text = unquote(path, errors="surrogateescape")
            return super().translate_path(quote(text.encode("utf-8", "surrogatepass"),
                                                safe="/"))

        def send_head(self):
            path = _inside(root, self.translate_path(self.path))
            if path and os.path.isdir(path):
                if not self.path.split("?", 1)[0].split("#", 1)[0].endswith("/"):
                    return super().send_head()  # the stdlib's redirect to name/
                index = _inside(root, os.path.join(path, "index.html"))
                if not index or not os.path.lexists(index):
                    return self.list_directory(path)
                path = index
            try:  # the guarded opener: a FIFO never blocks, a device is never read
                f = open_input(path, root) if path else None
            except (MnistconvError, OSError):
                f = None
            if f is None:
                self.send_error(404, "File not found")
                return None
            self.send_response(200)
            self.send_header("Content-type", self.guess_type(path))
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.end_headers()
            return f

        def list_directory(self, path):
            # Only what would be served (the stdlib's lists every name, links out too).
            try:
                entries = input_entries(path, root, lambda name: True,
                                        leave_out_refused=True)
            except (MnistconvError, OSError):
                self.send_error(404, "No permission to list directory")
                return None
            names = sorted((os.path.basename(p) + ("/" if os.path.isdir(p) else "")
                            for p in entries), key=str.lower)
            body = _listing(self.path, names)
            self.send_response(200)
            self.send_header("Content-type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return io.BytesIO(body)

        def end_headers(self):
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, fmt, *args):
            if log:
                log(f"{self.address_string()} {fmt % args}".translate(_CONTROL))

    handler = functools.partial(Handler, directory=root)
    try:
        return _bounded_server(ThreadingHTTPServer)((host, port), handler)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UsageError(None, f"port {port} on {host} is already in use",
                             _FIX_PORT) from None
        if e.errno == errno.EACCES:
            raise UsageError(None, f"not allowed to listen on port {port} on {host} "
                                   "(ports below 1024 need privileges)", _FIX_PORT) \
                from None
        raise


def _bounded_server(base):
    """base handling MAX_CONNECTIONS at once, without a traceback for a client gone."""
    import threading

    class Bounded(base):
        daemon_threads = True  # Ctrl-C stops serve without waiting for a client
        request_queue_size = MAX_CONNECTIONS  # waiting to be accepted, beyond those

        def __init__(self, *args, **kwargs):
            self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
            self.holding, self.holding_lock = set(), threading.Lock()
            super().__init__(*args, **kwargs)

        def free_slot(self, request):
            """Give back request's slot once (a Ctrl-C may reach two paths that free it)."""
            with self.holding_lock:
                if request in self.holding:
                    self.holding.discard(request)
                    self.slots.release()

        def process_request(self, request, client_address):
            if not self.slots.acquire(blocking=False):
                self.shutdown_request(request)
                return
            with self.holding_lock:
                self.holding.add(request)
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.free_slot(request)
                raise

        def process_request_thread(self, request, client_address):
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.free_slot(request)

        def handle_error(self, request, client_address):
            import sys
            if not isinstance(sys.exc_info()[1], OSError):  # a bug keeps its traceback
                super().handle_error(request, client_address)

    return Bounded


def _cut(connection):
    """End a connection past its deadline (both ways: its handler's next read or write
    fails, and the server frees its slot)."""
    import socket
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def _listing(url_path, names):
    """A folder's listing page (as http.server writes it) for the given names."""
    import html
    from urllib.parse import quote, unquote
    shown = html.escape(unquote(url_path.split("?", 1)[0].split("#", 1)[0]))
    # A name that is not UTF-8 (bytes kept as surrogates): its bytes in the link, shown
    # with U+FFFD for what cannot be read.
    items = "".join(f'<li><a href="{quote(os.fsencode(n))}">'
                    f'{html.escape(os.fsencode(n).decode("utf-8", "replace"))}</a></li>\n'
                    for n in names)
    page = (f'<!DOCTYPE HTML>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>Directory listing for {shown}</title>\n</head>\n<body>\n"
            f"<h1>Directory listing for {shown}</h1>\n<hr>\n<ul>\n{items}</ul>\n"
            "<hr>\n</body>\n</html>\n")
    return page.encode("utf-8", "surrogateescape")


def _inside(root, path):
    """path with its links resolved, if that lies under root; else None."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):  # a NUL in the request's path
        return None
    return real if real == root or real.startswith(root.rstrip(os.sep) + os.sep) else None

