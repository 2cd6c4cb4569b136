/**
 * A tiny PNG writer and a log-log line plot, with no dependency: a PNG is a
 * signature, an IHDR chunk, the zlib-compressed scanlines (each prefixed by a
 * filter byte, 0 here) in IDAT, and IEND; every chunk carries a CRC-32.
 * Text is drawn with a 3×5 pixel font, enough for tick labels and a legend.
 */
import { deflateSync } from "node:zlib";

export type Rgb = readonly [number, number, number];

const crcTable = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

function crc32(buf: Buffer): number {
  let c = 0xffffffff;
  for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

/** An RGB raster, white to start with. */
export class Canvas {
  readonly pixels: Buffer;

  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.pixels = Buffer.alloc(width * height * 3, 255);
  }

  set(x: number, y: number, c: Rgb): void {
    x = Math.round(x);
    y = Math.round(y);
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    const i = (y * this.width + x) * 3;
    this.pixels[i] = c[0];
    this.pixels[i + 1] = c[1];
    this.pixels[i + 2] = c[2];
  }

  /** A line `w` pixels thick (Bresenham-like, by steps along the longer axis). */
  line(x0: number, y0: number, x1: number, y1: number, c: Rgb, w = 1): void {
    const steps = Math.max(Math.abs(x1 - x0), Math.abs(y1 - y0), 1);
    for (let s = 0; s <= steps; s++) {
      const x = x0 + ((x1 - x0) * s) / steps;
      const y = y0 + ((y1 - y0) * s) / steps;
      for (let dx = 0; dx < w; dx++) for (let dy = 0; dy < w; dy++) this.set(x + dx, y + dy, c);
    }
  }

  rect(x: number, y: number, w: number, h: number, c: Rgb): void {
    for (let i = 0; i < w; i++) for (let j = 0; j < h; j++) this.set(x + i, y + j, c);
  }

  /** Text in the 3×5 font, each font pixel `scale` pixels wide. */
  text(x: number, y: number, s: string, c: Rgb, scale = 2): void {
    for (const ch of s.toUpperCase()) {
      const g = font[ch] ?? 0;
      for (let row = 0; row < 5; row++)
        for (let col = 0; col < 3; col++)
          if (g & (1 << (14 - (row * 3 + col))))
            this.rect(x + col * scale, y + row * scale, scale, scale, c);
      x += 4 * scale;
    }
  }

  png(): Buffer {
    const raw = Buffer.alloc((this.width * 3 + 1) * this.height);
    for (let y = 0; y < this.height; y++) {
      raw[y * (this.width * 3 + 1)] = 0;
      this.pixels.copy(
        raw,
        y * (this.width * 3 + 1) + 1,
        y * this.width * 3,
        (y + 1) * this.width * 3,
      );
    }
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(this.width, 0);
    ihdr.writeUInt32BE(this.height, 4);
    ihdr[8] = 8; // bit depth
    ihdr[9] = 2; // colour type: RGB
    return Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk("IHDR", ihdr),
      chunk("IDAT", deflateSync(raw)),
      chunk("IEND", Buffer.alloc(0)),
    ]);
  }
}

/** 3×5 glyphs, 15 bits each, rows top to bottom, most significant bit first. */
const glyphs: Record<string, string> = {
  "0": "111101101101111",
  "1": "010110010010111",
  "2": "111001111100111",
  "3": "111001111001111",
  "4": "101101111001001",
  "5": "111100111001111",
  "6": "111100111101111",
  "7": "111001001001001",
  "8": "111101111101111",
  "9": "111101111001111",
  A: "010101111101101",
  B: "110101110101110",
  C: "011100100100011",
  D: "110101101101110",
  E: "111100110100111",
  F: "111100110100100",
  G: "011100101101011",
  H: "101101111101101",
  I: "111010010010111",
  J: "001001001101010",
  K: "101101110101101",
  L: "100100100100111",
  M: "101111111101101",
  N: "110101101101101",
  O: "010101101101010",
  P: "110101110100100",
  Q: "010101101110011",
  R: "110101110101101",
  S: "011100010001110",
  T: "111010010010010",
  U: "101101101101111",
  V: "101101101101010",
  W: "101101111111101",
  X: "101101010101101",
  Y: "101101010010010",
  Z: "111001010100111",
  ".": "000000000000010",
  ",": "000000000010100",
  "-": "000000111000000",
  "/": "001001010100100",
  "(": "010100100100010",
  ")": "010001001001010",
  "+": "000010111010000",
  ":": "000010000010000",
  "=": "000111000111000",
  "<": "001010100010001",
  ">": "100010001010100",
  "×": "000101010101000",
  µ: "000101101110100",
};
const font: Record<string, number> = Object.fromEntries(
  Object.entries(glyphs).map(([k, v]) => [k, parseInt(v, 2)]),
);

export interface Series {
  label: string;
  color: Rgb;
  points: readonly (readonly [number, number])[];
}

export interface Panel {
  title: string;
  /** What the x axis counts. @default "runnables" */
  xLabel?: string;
  series: readonly Series[];
}

const decade = (v: number, up: boolean) =>
  10 ** (up ? Math.ceil(Math.log10(v)) : Math.floor(Math.log10(v)));
const tick = (v: number) =>
  v >= 1000 ? `1E${Math.round(Math.log10(v))}` : String(Number(v.toPrecision(2)));

/** Draws `panels` side by side, each a log-log plot with a grid at every decade and a legend. */
export function logLogPlot(panels: readonly Panel[]): Buffer {
  const pw = 420;
  // Room below the plot for the longest legend, one row per series.
  const rows = Math.max(...panels.map((p) => p.series.length));
  const ph = 260 + 48 + rows * 16 + 8;
  const canvas = new Canvas(pw * panels.length, ph);
  const grey: Rgb = [215, 215, 215];
  const black: Rgb = [0, 0, 0];
  panels.forEach((panel, i) => {
    const ox = i * pw;
    const left = ox + 70;
    const right = ox + pw - 20;
    const top = 40;
    const bottom = 260;
    const all = panel.series.flatMap((s) => s.points).filter(([x, y]) => x > 0 && y > 0);
    const x0 = decade(Math.min(...all.map((p) => p[0])), false);
    let x1 = decade(Math.max(...all.map((p) => p[0])), true);
    if (x1 === x0) x1 = x0 * 10; // one size only (a run of one ladder step)
    const y0 = decade(Math.min(...all.map((p) => p[1])), false);
    let y1 = decade(Math.max(...all.map((p) => p[1])), true);
    if (y1 === y0) y1 = y0 * 10;
    const px = (x: number) =>
      left +
      ((Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * (right - left);
    const py = (y: number) =>
      bottom -
      ((Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0))) * (bottom - top);
    canvas.text(ox + 10, 10, panel.title, black);
    for (let x = x0; x <= x1 * 1.001; x *= 10) {
      canvas.line(px(x), top, px(x), bottom, grey);
      canvas.text(px(x) - 10, bottom + 8, tick(x), black);
    }
    for (let y = y0; y <= y1 * 1.001; y *= 10) {
      canvas.line(left, py(y), right, py(y), grey);
      canvas.text(ox + 5, py(y) - 5, tick(y), black);
    }
    canvas.line(left, top, left, bottom, black);
    canvas.line(left, bottom, right, bottom, black);
    canvas.text(left + 60, bottom + 26, `${panel.xLabel ?? "runnables"} (log)`, black);
    panel.series.forEach((s, j) => {
      const pts = s.points.filter(([x, y]) => x > 0 && y > 0);
      for (let k = 1; k < pts.length; k++)
        canvas.line(px(pts[k - 1][0]), py(pts[k - 1][1]), px(pts[k][0]), py(pts[k][1]), s.color, 2);
      for (const [x, y] of pts) canvas.rect(px(x) - 3, py(y) - 3, 7, 7, s.color);
      const ly = bottom + 48 + j * 16;
      canvas.rect(ox + 10, ly, 12, 10, s.color);
      canvas.text(ox + 28, ly, s.label, black);
    });
  });
  return canvas.png();
}
