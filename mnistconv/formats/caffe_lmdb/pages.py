"""An LMDB data file written page by page with numpy, for the split shape that is
almost every caffe-lmdb output: raw Datums all of one length, small enough for a leaf
page (28 x 28 MNIST: 795 bytes). format.py writes every other shape through liblmdb.

Why by hand: through the `lmdb` package, writing the official training set took
0.105 s of CPU (a Python object per value, 60000 puts, copies into LMDB's dirty pages
and out at each commit, then the file read back for its SHA-256) and its process
peaked at 83 MB; here the pixels go once into whole pages, which are hashed as they
are written: 0.062 s, of which the SHA-256 is 0.029 s, and a 50 MB peak. Only where
liblmdb itself would write this layout (little-endian, 64-bit, 4096-byte pages).

The file, as liblmdb 0.9 lays it out (mdb.c, MDB_DATA_VERSION 1; little-endian,
64-bit, 4096-byte pages, page n at byte n x 4096):
  page header (16 bytes)  mp_pgno u64, mp_pad u16, mp_flags u16 (P_BRANCH 1, P_LEAF 2,
                          P_META 8), mp_lower u16 (16 + 2 x its nodes), mp_upper u16
                          (offset of its lowest node)
  mp_ptrs                 u16 offset of each node, in key order; the nodes are placed
                          from the end of the page down, the first highest
  leaf node               data size u32, flags u16 (0), key size u16, key, data; padded
                          to an even length
  branch node             a child's page number (48 bits), key size u16, key: the first
                          key of the child's subtree, empty in a page's first node
  meta (pages 0 and 1)    the header (P_META), then MDB_meta: magic 0xBEEFC0DE u32,
                          version 1 u32, address u64 (0), map size u64, the free list's
                          and the main MDB_db (pad u32: the free list's holds the page
                          size; flags u16: the free list's are the environment's,
                          MDB_NOSUBDIR | MDB_INTEGERKEY; depth u16; branch, leaf and
                          overflow page counts, entries, root page: u64 each, the root
                          ~0 when empty), last page u64, transaction id u64
A reader takes the meta page with the larger transaction id: page 0 is the empty
environment liblmdb first writes (txnid 0), page 1 the tree (txnid 1). Then come the
leaf pages in key order (page 2 on), then each level of branch pages bottom up, the
root last; children are shared evenly among a level's pages (liblmdb asserts that a
branch page has two keys at least). A value larger than fits a leaf node (key + data +
8 bytes above 2038, liblmdb's me_nodemax) goes to overflow pages, not written here.
"""

import os
import sys

import numpy as np

PAGE = 4096
HEADER = 16
NODE_HEADER = 8
KEY = 8  # b"%08d"
P_BRANCH, P_LEAF, P_META = 0x01, 0x02, 0x08
P_INVALID = (1 << 64) - 1
ENV_FLAGS = 0x4000 | 0x08  # MDB_NOSUBDIR (data.mdb is the environment), MDB_INTEGERKEY
MAX_LEAF_NODE = ((PAGE - HEADER) // 2 & -2) - 2
# Branch nodes: 8 + KEY bytes and a pointer, the first node's key empty.
BRANCH_FANOUT = 1 + (PAGE - HEADER - NODE_HEADER - 2) // (NODE_HEADER + KEY + 2)
_HEADER = np.dtype([("pgno", "<u8"), ("pad", "<u2"), ("flags", "<u2"), ("lower", "<u2"),
                    ("upper", "<u2")])
_POWERS = 10 ** np.arange(KEY - 1, -1, -1, dtype=np.int64)


def fits(value_size) -> bool:
    """Whether values of this size go in leaf nodes, on a machine where liblmdb
    writes the layout above (else format.py has liblmdb write them)."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else PAGE
    return sys.byteorder == "little" and sys.maxsize > 1 << 32 and page == PAGE and \
        NODE_HEADER + KEY + value_size <= MAX_LEAF_NODE


def keys(indices):
    """b"%08d" of each index, as rows of an n x 8 uint8 array."""
    indices = np.asarray(indices, np.int64)
    return ((indices[:, None] // _POWERS) % 10 + 48).astype(np.uint8)


def _headers(pages, first_pgno, flags, nodes, lowest):
    h = pages[:, :HEADER].view(_HEADER)[:, 0]
    h["pgno"] = np.arange(first_pgno, first_pgno + len(pages))
    h["flags"] = flags
    h["lower"] = HEADER + 2 * nodes
    h["upper"] = lowest


def _u8(words, dtype="<u8"):
    return np.frombuffer(np.array(words, dtype).tobytes(), np.uint8)


class LeafWriter:
    """Writes an LMDB of `count` values of `value_size` bytes under keys b"%08d" to a
    binary file (a fileio.HashingWriter): open, add() values in key order, close()."""

    def __init__(self, out, count, value_size, map_size):
        assert fits(value_size) and count < 10 ** KEY
        self.out, self.count, self.size = out, count, value_size
        self.node = NODE_HEADER + KEY + value_size + (value_size & 1)
        self.per_page = (PAGE - HEADER) // (self.node + 2)
        self.leaves = -(-count // self.per_page)
        self.levels = []  # branch pages per level, bottom up
        n = self.leaves
        while n > 1:
            n = -(-n // BRANCH_FANOUT)
            self.levels.append(n)
        self.added = self.written = 0  # values added; leaf pages written
        self.open, self.open_nodes = np.zeros((1, PAGE), np.uint8), 0  # a page not full
        self._write(self._metas(map_size))

    def _metas(self, map_size):
        """Page 0, the empty environment (txnid 0); page 1, the tree (txnid 1)."""
        last = 1 + self.leaves + sum(self.levels)
        map_size = max(map_size, (last + 1) * PAGE)
        root = last if self.leaves else P_INVALID
        depth = len(self.levels) + 1 if self.leaves else 0
        metas = np.zeros((2, PAGE), np.uint8)
        _headers(metas, 0, P_META, 0, 0)
        metas[:, 12:14] = 0  # mp_lower: 0 in a meta page, as liblmdb leaves it
        for i, (main, last_pgno) in enumerate((
                ([0, 0, 0, 0, 0, P_INVALID], 1),
                ([depth << 48, sum(self.levels), self.leaves, 0, self.count, root],
                 last))):
            words = [0xBEEFC0DE | 1 << 32, 0, map_size,
                     PAGE | ENV_FLAGS << 32, 0, 0, 0, 0, P_INVALID,
                     *main, last_pgno, i]
            metas[i, HEADER:HEADER + 8 * len(words)] = _u8(words)
        return metas

    def add(self, columns, n):
        """Append n values, each the concatenation of `columns`: bytes (the same in
        every value) or n x k uint8 arrays. They are copied once, into their pages."""
        assert sum(len(c) if isinstance(c, bytes) else c.shape[1] for c in columns) \
            == self.size
        done = 0
        if self.open_nodes:
            done = min(n, self.per_page - self.open_nodes)
            self._fill(self._slots(self.open)[0, self.open_nodes:self.open_nodes + done],
                       columns, 0, done)
            self.open_nodes += done
            if self.open_nodes == self.per_page:
                self._leaves(self.open, self.per_page)
                self.open, self.open_nodes = np.zeros((1, PAGE), np.uint8), 0
        full = (n - done) // self.per_page
        if full:
            block = np.zeros((full, PAGE), np.uint8)
            self._fill(self._slots(block), columns, done, done + full * self.per_page)
            self._leaves(block, self.per_page)
            done += full * self.per_page
        if done < n:
            self._fill(self._slots(self.open)[0, :n - done], columns, done, n)
            self.open_nodes = n - done
        self.added += n

    def _slots(self, pages):
        """Pages x nodes x node bytes: where each node goes, the first at the end."""
        per = self.per_page
        return pages[:, PAGE - per * self.node:].reshape(len(pages), per, self.node)[:, ::-1]

    def _fill(self, slots, columns, lo, hi):
        """Nodes lo..hi of the values being added, into slots (... x node bytes)."""
        shape = slots.shape[:-1]
        slots[..., :NODE_HEADER] = _u8([self.size, KEY << 16], "<u4")
        start = self.added + lo
        slots[..., NODE_HEADER:NODE_HEADER + KEY] = \
            keys(range(start, start + hi - lo)).reshape(shape + (KEY,))
        at = NODE_HEADER + KEY
        for column in columns:
            if isinstance(column, bytes):
                slots[..., at:at + len(column)] = np.frombuffer(column, np.uint8)
                at += len(column)
            else:
                k = column.shape[1]
                slots[..., at:at + k] = column[lo:hi].reshape(shape + (k,))
                at += k

    def _leaves(self, pages, nodes):
        """Headers and pointers of leaf pages holding `nodes` nodes each, then out."""
        _headers(pages, 2 + self.written, P_LEAF, nodes, PAGE - nodes * self.node)
        pages[:, HEADER:HEADER + 2 * nodes] = _u8(
            PAGE - self.node * np.arange(1, nodes + 1), "<u2")
        self._write(pages)
        self.written += len(pages)

    def close(self):
        """The last leaf page, then the branch pages; checks the count."""
        if self.open_nodes:
            self._leaves(self.open, self.open_nodes)
            self.open_nodes = 0
        if self.added != self.count or self.written != self.leaves:
            raise ValueError(f"{self.added} values written to an LMDB of {self.count}")
        # The level below: its pages' numbers and the index of each one's first key.
        pgnos = np.arange(2, 2 + self.leaves)
        firsts = np.arange(self.leaves) * self.per_page
        for count in self.levels:
            parts = np.array_split(np.arange(len(pgnos)), count)
            pages = np.zeros((count, PAGE), np.uint8)
            for page, part in zip(pages, parts):
                self._branch(page, pgnos[part], firsts[part])
            sizes = np.array([len(part) for part in parts])
            first_pgno = int(pgnos[-1]) + 1
            _headers(pages, first_pgno, P_BRANCH, sizes,
                     PAGE - NODE_HEADER - (NODE_HEADER + KEY) * (sizes - 1))
            self._write(pages)
            firsts = firsts[[part[0] for part in parts]]
            pgnos = np.arange(first_pgno, first_pgno + count)

    @staticmethod
    def _branch(page, pgnos, firsts):
        """The nodes and pointers of one branch page: a node per child page, its key
        the child's first key (none for the first child), placed from the end down."""
        size = NODE_HEADER + KEY
        n = len(pgnos)
        nodes = np.zeros((n, size), np.uint8)
        nodes[:, :6] = np.asarray(pgnos, "<u8").view(np.uint8).reshape(n, 8)[:, :6]
        nodes[1:, 6] = KEY
        nodes[1:, NODE_HEADER:] = keys(firsts[1:])
        top = PAGE - NODE_HEADER
        page[top:] = nodes[0, :NODE_HEADER]
        lowest = top - (n - 1) * size
        page[lowest:top].reshape(n - 1, size)[::-1] = nodes[1:]
        page[HEADER:HEADER + 2 * n] = _u8([top] + list(range(top - size, lowest - 1, -size)),
                                          "<u2")

    def _write(self, pages):
        self.out.write(memoryview(pages).cast("B"))
