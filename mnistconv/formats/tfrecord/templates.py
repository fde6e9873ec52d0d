"""The TFRecord reader's index-pass shortcut (Templates): records that differ from one
already parsed only in their image are indexed without a parse."""

from ... import codecs

JPEG = b"\xff\xd8\xff"
PNG = b"\x89PNG\r\n\x1a\n"

_COMPLEMENT = bytes(range(255, -1, -1))  # an image no record holds where its image was
_NOT_CODED = -1  # a template's kind check: the image is neither JPEG nor PNG


class Templates:
    """The index pass's shortcut. A parsed record teaches a template: for its length,
    the bytes before its image (and the image's JPEG/PNG magic), where the image lies,
    and the bytes after it with what the record holds; a later record of that length,
    head and tail is the same but for its image. Learnt only from a record that is the
    deterministic serialization of its parse and whose image, complemented, changes
    exactly the image's bytes. Bounded by MAX_TAILS tails and MAX_BYTES bytes."""

    MAX_TAILS = 1 << 16
    MAX_BYTES = 16 << 20
    PER_LENGTH = 16  # templates of one record length (labels before the image: slim)

    def __init__(self):
        self.by_length = {}  # record length -> [(head, image start, length, kind, tails)]
        self.tails = self.bytes = 0

    def index(self, block, starts, sizes, rows, parse):
        """Append each record's row to rows: from a template, or parse(k) for record k
        of the block, which appends it (and learns from it)."""
        if not isinstance(block, bytes):
            for k in range(len(starts)):
                parse(k)
            return
        get, append, startswith = self.by_length.get, rows.append, block.startswith
        for k, (start, size) in enumerate(zip(starts, sizes)):
            for head, at, n, kind, tails in get(size, ()):
                if startswith(head, start) and (kind is not _NOT_CODED or not (
                        startswith(JPEG, start + at, start + at + n) or
                        startswith(PNG, start + at, start + at + n))):
                    row = tails.get(block[start + at + n:start + size])
                    if row is not None:
                        append(row)
                        break
            else:
                parse(k)

    def learn(self, layout, example, data, row):
        """Learn from a record parsed the checked way: its data, its parse, its row."""
        start, n = row[2], row[3]
        if n == 0 or self.tails >= self.MAX_TAILS or self.bytes >= self.MAX_BYTES:
            return
        values = example.features.feature[layout.image_key].bytes_list.value
        image = values[0]
        if len(image) != n or data[start:start + n] != image:
            return
        before, after = data[:start], data[start + n:]
        flipped = image.translate(_COMPLEMENT)
        try:
            if example.SerializeToString(deterministic=True) != data:
                return  # not serialized as mnistconv does (e.g. another map order)
            values[0] = flipped
            if example.SerializeToString(deterministic=True) != before + flipped + after:
                return
        finally:
            values[0] = image
        kind = codecs.image_kind(image)
        head = before + {"jpeg": JPEG, "png": PNG}.get(kind, b"")
        kind = _NOT_CODED if kind == "raw" else 0
        entries = self.by_length.setdefault(len(data), [])
        for entry in entries:
            if entry[:4] == (head, start, n, kind):
                break
        else:
            if len(entries) >= self.PER_LENGTH:
                return
            entry = (head, start, n, kind, {})
            entries.append(entry)
            self.bytes += len(head)
        entry[4][after] = row
        self.tails += 1
        self.bytes += len(after)
