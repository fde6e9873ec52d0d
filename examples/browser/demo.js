// The demo page: query parameters choose what to load.
//   pack=<url of the pack directory>   default "pack/"
//   split=<split id>                   default "test"
//   form=gz|bin                        default "gz" (the .bin.gz; "bin" for the .bin)
//   file=<url>                         load this file instead of one the manifest lists
//   show=<n>                           how many digits to draw, default 100
// It draws the preview, then a grid of digits with their labels, and writes a JSON
// summary of what gdmnist.js decoded into #result (the browser test reads it).
import { GdmnistError, image, loadGdmnist } from "./gdmnist.js";

const params = new URLSearchParams(location.search);
const packUrl = new URL(params.get("pack") || "pack/", location.href);
const $ = (id) => document.getElementById(id);

function drawDigit(container, pixels, rows, columns, caption) {
  const canvas = document.createElement("canvas");
  canvas.width = columns;
  canvas.height = rows;
  const context = canvas.getContext("2d");
  const rgba = context.createImageData(columns, rows);
  for (let i = 0; i < rows * columns; i++) {
    rgba.data.set([pixels[i], pixels[i], pixels[i], 255], 4 * i);
  }
  context.putImageData(rgba, 0, 0);
  const figure = document.createElement("figure");
  const label = document.createElement("figcaption");
  label.textContent = caption;
  figure.append(canvas, label);
  container.append(figure);
}

// CRC-32 (zlib's), so the test can compare with Python's zlib.crc32 of the same bytes.
const CRC_TABLE = new Uint32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

async function showPreview() {
  try {
    const response = await fetch(new URL("preview.json", packUrl));
    if (!response.ok) return;
    const preview = await response.json();
    for (const example of preview.examples) {
      const pixels = Uint8Array.from(atob(example.pixels), (ch) => ch.charCodeAt(0));
      drawDigit($("preview"), pixels, preview.rows, preview.columns, String(example.label));
    }
  } catch (e) {
    console.warn("no preview:", e); // the preview is a nicety; the split still loads
  }
}

async function fileToLoad() {
  if (params.get("file")) return new URL(params.get("file"), location.href).href;
  const split = params.get("split") || "test";
  const manifestUrl = new URL("manifest.json", packUrl);
  const response = await fetch(manifestUrl);
  if (!response.ok) throw new GdmnistError(manifestUrl.href, `HTTP ${response.status}`);
  const manifest = await response.json();
  const entry = Object.values({ ...manifest.splits, ...manifest.optional_splits })
    .find((e) => e.id === split);
  if (!entry) throw new GdmnistError(manifestUrl.href, `no split "${split}"`);
  const name = params.get("form") === "bin" ? entry.file : entry.gzip_file;
  return new URL(name, packUrl).href;
}

async function main() {
  await showPreview();
  const url = await fileToLoad();
  $("split-title").textContent = `Split: ${url.split("/").pop()}`;
  const data = await loadGdmnist(url);
  const show = Math.min(data.count, Number(params.get("show") || 100));
  for (let i = 0; i < show; i++) {
    drawDigit($("grid"), image(data, i), data.rows, data.columns, String(data.labels[i]));
  }
  const classCounts = [];
  for (const label of data.labels) classCounts[label] = (classCounts[label] || 0) + 1;
  const indexBytes = new Uint8Array(data.count * 4);
  const indexView = new DataView(indexBytes.buffer);
  data.originalIndices.forEach((v, i) => indexView.setUint32(4 * i, v, true));
  $("result").textContent = JSON.stringify({
    status: "ok", file: url, compressed: data.compressed, count: data.count,
    rows: data.rows, columns: data.columns, pixelBytes: data.pixels.length,
    pixelCrc32: crc32(data.pixels), labelCrc32: crc32(data.labels),
    indexCrc32: crc32(indexBytes), classCounts: Array.from(classCounts, (n) => n || 0),
    firstLabels: Array.from(data.labels.subarray(0, 20)),
    firstIndices: Array.from(data.originalIndices.subarray(0, 20)),
    drawn: $("grid").querySelectorAll("canvas").length,
  });
  $("status").textContent = `${data.count} digits decoded from ${url}`;
  document.body.dataset.status = "ok";
}

main().catch((e) => {
  $("status").textContent = "Failed.";
  $("error").hidden = false;
  $("error").textContent = e.message;
  $("result").textContent = JSON.stringify({ status: "error", error: e.message,
                                             name: e.name });
  document.body.dataset.status = "error";
});
