"""`serve` serves only the folder (mnistconv.views.serve): regular files and folders under it,
no link out, no FIFO, device or socket; only requests addressed to localhost,
127.0.0.1 or [::1] with its port; connections bounded; a client that leaves prints no
traceback; Ctrl-C stops it. Real clients (http.client, raw sockets) on 127.0.0.1."""

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading

import pytest

from helpers import REPO, http_get


@pytest.fixture
def tree(tmp_path):
    """A folder to serve, with everything that must not be served beside what must."""
    root = tmp_path / "site"
    (root / "sub").mkdir(parents=True)
    (root / "a.bin").write_bytes(bytes(range(256)) * 4)
    (root / "sub" / "b.txt").write_bytes(b"inside\n")
    (root / "big.bin").write_bytes(os.urandom(1 << 20) * 16)
    (tmp_path / "secret.txt").write_bytes(b"outside the folder\n")
    os.symlink("sub/b.txt", root / "link-in")
    os.symlink("/etc", root / "etc")
    os.symlink("/etc/passwd", root / "passwd")
    os.symlink(tmp_path / "secret.txt", root / "secret")
    os.symlink("../secret.txt", root / "sub" / "up")
    os.symlink("/dev/zero", root / "zero")
    os.symlink("loop", root / "loop")
    os.mkfifo(root / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    yield root
    sock.close()


class Serving:
    """`mnistconv serve ROOT --port 0 -q` as a child process."""

    def __init__(self, root):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mnistconv", "serve", str(root), "--port", "0", "-q"],
            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(REPO)))
        self.first = self.proc.stderr.readline().decode()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", self.first)
        assert match, self.first
        self.port = int(match.group(1))

    def get(self, path, host=None):
        """(status, body) of GET path, with the Host header given (default: the URL's)."""
        return http_get(self.port, path, host)

    def stop(self):
        """Ctrl-C; (exit code, the rest of stderr)."""
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            with open(f"/proc/{self.proc.pid}/status") as f:
                status = f.read()
            self.proc.kill()
            _, err = self.proc.communicate()
            raise AssertionError(f"serve did not stop on SIGINT: {err!r}\n{status}") from None
        return self.proc.returncode, err.decode()


@pytest.fixture
def serving(tree):
    s = Serving(tree)
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


def hrefs(page):
    return re.findall(rb'href="([^"]*)"', page)


def test_serves_files_and_links_that_stay_inside(serving, tree):
    assert serving.get("/a.bin") == (200, (tree / "a.bin").read_bytes())
    assert serving.get("/sub/b.txt") == (200, b"inside\n")
    assert serving.get("/link-in") == (200, b"inside\n")
    status, page = serving.get("/")
    assert status == 200
    assert hrefs(page) == [b"a.bin", b"big.bin", b"link-in", b"sub/"]
    assert hrefs(serving.get("/sub/")[1]) == [b"b.txt"]
    assert serving.get("/sub")[0] == 301
    assert serving.stop() == (130, "Interrupted.\n")


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc/", "/passwd", "/secret",
                                  "/sub/up", "/zero", "/fifo", "/sock",
                                  "/../secret.txt", "/%2e%2e/secret.txt", "/missing",
                                  "/loop", "/a.bin%00", "/%00/", "/sub/%ff%fe"])
def test_nothing_outside_or_not_regular_is_served(path, serving):
    """A link out (to /etc, to a file beside the folder), a device, a FIFO (which
    blocked a handler for ever), a socket, a link to itself, a NUL: 404, and serve
    still answers, printed nothing, and stops."""
    status, body = serving.get(path)
    assert status == 404 and b"root:" not in body and b"outside" not in body
    assert serving.get("/sub/b.txt") == (200, b"inside\n")
    assert serving.stop() == (130, "Interrupted.\n")


@pytest.mark.parametrize("host, status", [
    ("127.0.0.1:{port}", 200), ("localhost:{port}", 200), ("[::1]:{port}", 200),
    ("LOCALHOST:{port}", 200), ("evil.example:{port}", 403), ("evil.example", 403),
    ("127.0.0.1", 403), ("localhost:1", 403), ("127.0.0.1.evil.example:{port}", 403),
    ("", 403)])
def test_host_header_must_name_this_machine_and_port(host, status, serving):
    """DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 sends
    Host: evil.example; only the loopback names with serve's port are answered."""
    got, body = serving.get("/a.bin", host=host.format(port=serving.port))
    assert got == status
    if status == 403:
        assert b"Host must be localhost, 127.0.0.1 or [::1] with port " \
               + str(serving.port).encode() in body


def test_a_client_that_leaves_prints_no_traceback(serving):
    """Sixteen clients drop the connection (reset) part-way through a 16 MB file; serve
    prints nothing for them, still answers, and stops on Ctrl-C."""
    for _ in range(16):
        s = socket.create_connection(("127.0.0.1", serving.port))
        s.sendall(f"GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1:{serving.port}\r\n\r\n"
                  .encode())
        assert s.recv(4096)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    assert serving.get("/sub/b.txt") == (200, b"inside\n")
    assert serving.stop() == (130, "Interrupted.\n")


def test_connections_are_bounded(tree, monkeypatch):
    """At most MAX_CONNECTIONS at once: with that many clients each holding a handler
    (a 48 MB file they do not read), one more is closed unanswered; the stalled
    handlers give up after CONNECTION_TIMEOUT (made short here) and the server answers
    again while those clients are still connected."""
    from mnistconv.views import serve
    monkeypatch.setattr(serve, "CONNECTION_TIMEOUT", 2)
    (tree / "big.bin").write_bytes(bytes(48 << 20))
    server = serve.make_server(tree, "127.0.0.1", 0)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def ask(name):
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(20)
        s.sendall(f"GET /{name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        try:
            return s, s.recv(15)
        except ConnectionResetError:
            return s, b""

    stalled = []
    try:
        for _ in range(serve.MAX_CONNECTIONS):
            s, answer = ask("big.bin")
            stalled.append(s)
            assert answer == b"HTTP/1.0 200 OK"  # its handler is running
        extra, answer = ask("a.bin")
        extra.close()
        assert answer == b""  # closed, not served
        for _ in range(100):  # the handlers time out, one by one
            s, answer = ask("a.bin")
            s.close()
            if answer:
                break
            threading.Event().wait(0.2)
        assert answer == b"HTTP/1.0 200 OK"
    finally:
        for s in stalled:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        server.shutdown()
        server.server_close()


def test_a_ctrl_c_while_a_request_thread_starts_gives_its_slot_back_once(monkeypatch):
    """Ctrl-C can land in process_request after the request's thread has started: the
    slot is given back once, by whichever side gets there first (it was given back twice:
    'Semaphore released too many times' and a traceback instead of 'Interrupted.')."""
    import http.server
    import socketserver
    from mnistconv.views import serve

    started = socketserver.ThreadingMixIn.process_request

    def start_then_interrupt(server, request, client_address):
        started(server, request, client_address)
        raise KeyboardInterrupt

    monkeypatch.setattr(socketserver.ThreadingMixIn, "process_request", start_then_interrupt)
    errors = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    server = serve._bounded_server(http.server.ThreadingHTTPServer)(
        ("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    before = set(threading.enumerate())
    try:
        for _ in range(3):
            ours, theirs = socket.socketpair()
            theirs.close()  # the handler reads an empty request and ends
            with pytest.raises(KeyboardInterrupt):
                server.process_request(ours, ("127.0.0.1", 1))
        for thread in set(threading.enumerate()) - before:
            thread.join(10)
        assert errors == []
        assert not server.holding
        taken = [server.slots.acquire(blocking=False) for _ in range(serve.MAX_CONNECTIONS + 1)]
        assert taken == [True] * serve.MAX_CONNECTIONS + [False]
    finally:
        server.server_close()


def _in_thread(root, log=None):
    from mnistconv.views import serve
    server = serve.make_server(root, "127.0.0.1", 0, log=log)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def test_slow_clients_are_cut_at_the_request_deadline(tree, monkeypatch):
    """Issue 35: MAX_CONNECTIONS clients each sending a byte of their request every
    half second (never silent for CONNECTION_TIMEOUT) held every slot for ever. The
    whole request has REQUEST_DEADLINE (made short here): then they are cut and the
    server answers again, while they are still dripping."""
    from mnistconv.views import serve
    monkeypatch.setattr(serve, "REQUEST_DEADLINE", 2, raising=False)
    server, port = _in_thread(tree)
    drips = [socket.create_connection(("127.0.0.1", port))
             for _ in range(serve.MAX_CONNECTIONS)]
    stop = threading.Event()

    def drip():
        while not stop.wait(0.5):
            for s in drips:
                try:
                    s.send(b"X")
                except OSError:
                    pass

    dripping = threading.Thread(target=drip, daemon=True)
    try:
        for s in drips:
            s.send(b"GET /a.bin HTTP/1.1\r\nX-Slow: ")
        dripping.start()
        threading.Event().wait(0.5)
        answers = []
        for _ in range(40):  # up to 8 s of dripping
            c = socket.create_connection(("127.0.0.1", port))
            c.settimeout(5)
            c.sendall(f"GET /sub/b.txt HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            try:
                answers.append(c.recv(15))
            except (ConnectionResetError, socket.timeout):
                answers.append(b"")
            c.close()
            if answers[-1]:
                break
            threading.Event().wait(0.2)
        assert answers[0] == b""  # every slot was taken by a dripping client
        assert answers[-1] == b"HTTP/1.0 200 OK"
        assert dripping.is_alive()
    finally:
        stop.set()
        for s in drips:
            s.close()
        server.shutdown()
        server.server_close()


def test_the_log_escapes_control_characters(tree):
    """Issue 35: a request line with an escape sequence was logged raw (to the terminal)."""
    logged = []
    server, port = _in_thread(tree, logged.append)
    try:
        c = socket.create_connection(("127.0.0.1", port))
        c.settimeout(10)
        c.sendall(f"GET /\x1b[2J\x07\x9b HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
                  .encode("latin-1"))
        assert c.recv(12) == b"HTTP/1.0 404"
        c.close()
        for _ in range(50):
            if len(logged) == 2:
                break
            threading.Event().wait(0.1)
    finally:
        server.shutdown()
        server.server_close()
    assert '"GET /\\x1b[2J\\x07\\x9b HTTP/1.1" 404' in logged[1]
    assert not any(ch < " " or "\x7f" <= ch < "\xa0" for ch in "".join(logged))


def test_a_name_that_is_not_utf8_is_listed_and_served(tree):
    """Issue 35: listing a folder holding a name that is not UTF-8 raised in the handler
    (a traceback on serve's stderr, no page)."""
    os.close(os.open(os.fsencode(tree / "sub") + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY))
    with open(os.fsencode(tree / "sub") + b"/caf\xe9.txt", "wb") as f:
        f.write(b"latin-1 name\n")
    s = Serving(tree)
    try:
        status, page = s.get("/sub/")
        assert status == 200
        assert b'href="caf%E9.txt"' in page and "caf\ufffd.txt".encode() in page
        assert s.get("/sub/caf%E9.txt") == (200, b"latin-1 name\n")
        code, err = s.stop()
        assert "Traceback" not in err, err
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()
