/**
 * A QR code drawn as SVG from uqr's `encode()` matrix: one path of the dark modules (runs of a
 * row merged), dark on a light quiet zone whatever the colour scheme, so phone cameras read it.
 * Built as Preact elements (no markup strings), so it passes the strict CSP.
 */
import { useMemo } from 'preact/hooks';
import { encode } from 'uqr';

/** The path of the dark modules: one `M x y h w v 1 h -w z` per horizontal run. */
export function qrPath(matrix: boolean[][]): string {
  const parts: string[] = [];
  matrix.forEach((row, y) => {
    let x = 0;
    while (x < row.length) {
      if (!row[x]) {
        x++;
        continue;
      }
      const start = x;
      while (x < row.length && row[x]) x++;
      const run = x - start;
      parts.push(`M${start} ${y}h${run}v1h-${run}z`);
    }
  });
  return parts.join('');
}

/**
 * `value` encoded with error correction M and the standard four-module quiet zone; `label` is the
 * image's accessible name (role=img, aria-label and <title>).
 */
export function QrCode({ value, label, size = 200 }: { value: string; label: string; size?: number }) {
  const { modules, path } = useMemo(() => {
    const qr = encode(value, { ecc: 'M', border: 4 });
    return { modules: qr.size, path: qrPath(qr.data) };
  }, [value]);
  return (
    <div class="qr">
      <svg
        role="img"
        aria-label={label}
        viewBox={`0 0 ${modules} ${modules}`}
        width={size}
        height={size}
        shape-rendering="crispEdges"
        xmlns="http://www.w3.org/2000/svg"
      >
        <title>{label}</title>
        {/* Scanners need dark modules on a light ground, in dark mode too: fixed colours on purpose. */}
        <rect width={modules} height={modules} fill="#ffffff" />
        <path d={path} fill="#000000" />
      </svg>
    </div>
  );
}
