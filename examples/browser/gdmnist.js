// GDMNIST1 in the browser: fetch a .bin or .bin.gz, check it, return typed arrays.
// A dependency-free ES module. Layout (little-endian uint32 fields):
//   0..7 ASCII "GDMNIST1"; 8 count; 12 rows; 16 columns; 20 pixel offset (32);
//   24 label offset (32 + count*rows*columns); 28 original-index offset (label offset
//   + count, rounded up to a multiple of 4); then count*rows*columns uint8 pixels,
//   count uint8 labels, 0..3 zero bytes, count uint32 original indices. Nothing after.
// A .bin.gz (detected by its first bytes 1f 8b, whatever the name) is unpacked with
// DecompressionStream("gzip").

export const MAGIC = "GDMNIST1";
export const HEADER_BYTES = 32;

/** Every problem with a file: the message names the file (its URL) and what is wrong. */
export class GdmnistError extends Error {
  constructor(source, message) {
    super(`${source}: ${message}`);
    this.name = "GdmnistError";
    this.source = source;
  }
}

/** Fetch and decode one file. Resolves to
 *  {source, count, rows, columns, pixels: Uint8Array (count*rows*columns),
 *   labels: Uint8Array (count), originalIndices: Uint32Array (count), compressed}. */
export async function loadGdmnist(url, { signal } = {}) {
  let response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    throw new GdmnistError(url, `cannot fetch (${e.message})`);
  }
  if (!response.ok) {
    throw new GdmnistError(url, `HTTP ${response.status} ${response.statusText}`.trim());
  }
  let bytes = new Uint8Array(await response.arrayBuffer());
  const compressed = bytes.length >= 2 && bytes[0] === 0x1f && bytes[1] === 0x8b;
  if (compressed) bytes = await gunzip(bytes, url);
  return { ...parseGdmnist(bytes, url), compressed };
}

/** Decompress gzip bytes with the browser's own DecompressionStream. */
export async function gunzip(bytes, source = "data") {
  if (typeof DecompressionStream === "undefined") {
    throw new GdmnistError(source, "this browser has no DecompressionStream; load the .bin");
  }
  try {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  } catch (e) {
    throw new GdmnistError(source, `not a valid gzip stream (${e.message})`);
  }
}

/** Check and decode a whole GDMNIST1 file held in memory (a Uint8Array or ArrayBuffer).
 *  The header is checked against the real length before any view is made. */
export function parseGdmnist(data, source = "data") {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  if (bytes.length < HEADER_BYTES) {
    throw new GdmnistError(source, `too short for a GDMNIST1 header: ${bytes.length} bytes`);
  }
  const magic = String.fromCharCode(...bytes.subarray(0, 8));
  if (magic !== MAGIC) {
    throw new GdmnistError(source, `not a GDMNIST1 file: magic ${JSON.stringify(magic)}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, HEADER_BYTES);
  const [count, rows, columns, pixelOffset, labelOffset, indexOffset] =
    [8, 12, 16, 20, 24, 28].map((at) => view.getUint32(at, true));
  if (rows === 0 || columns === 0) {
    throw new GdmnistError(source, `image size ${rows} x ${columns}: must be positive`);
  }
  // Plain Numbers are exact up to 2^53, far beyond any uint32 product here.
  const want = {
    pixel: HEADER_BYTES,
    label: HEADER_BYTES + count * rows * columns,
  };
  want.index = Math.ceil((want.label + count) / 4) * 4;
  const found = { pixel: pixelOffset, label: labelOffset, index: indexOffset };
  for (const part of ["pixel", "label", "index"]) {
    if (found[part] !== want[part]) {
      throw new GdmnistError(source, `${part} offset ${found[part]} disagrees with count ` +
        `${count} of ${rows} x ${columns} images (expected ${want[part]})`);
    }
  }
  const total = want.index + 4 * count;
  if (bytes.length < total) {
    throw new GdmnistError(source, `truncated: the header declares ${count} images ` +
      `(${total} bytes), the file holds ${bytes.length}`);
  }
  if (bytes.length > total) {
    throw new GdmnistError(source, `trailing bytes: ${bytes.length - total} after the ` +
      `${total} the header declares`);
  }
  const pixels = bytes.slice(want.pixel, want.label);
  const labels = bytes.slice(want.label, want.label + count);
  // Copy the indices out byte-exactly, little-endian whatever the machine.
  const originalIndices = new Uint32Array(count);
  const indexView = new DataView(bytes.buffer, bytes.byteOffset + want.index, 4 * count);
  for (let i = 0; i < count; i++) originalIndices[i] = indexView.getUint32(4 * i, true);
  return { source, count, rows, columns, pixels, labels, originalIndices };
}

/** One image as a Uint8Array view (rows*columns, row-major). */
export function image(decoded, i) {
  const size = decoded.rows * decoded.columns;
  return decoded.pixels.subarray(i * size, (i + 1) * size);
}

/** Float32 input for a model: pixels / 255 (the manifest's recommended normalisation). */
export function toFloat32(decoded) {
  const out = new Float32Array(decoded.pixels.length);
  for (let i = 0; i < out.length; i++) out[i] = decoded.pixels[i] / 255;
  return out;
}
