/**
 * A half-circle gauge of a value against a maximum, as an SVG image with a text alternative
 * (role="img" and an aria-label saying the numbers), so it reads the same without the picture.
 * Colours come from styles.css (.gauge .track/.fill/.fill.high); from `high` (default 80 %) the
 * fill turns to the danger colour, and the percentage is printed, so colour is never the only cue.
 */
import type { ComponentChildren } from 'preact';

const ARC = 'M 20 100 A 80 80 0 0 1 180 100';

export function Gauge({
  value,
  max,
  label,
  unit,
  high = 0.8,
  children,
}: {
  value: number;
  max: number;
  /** What is measured, e.g. "Connection slots held". */
  label: string;
  /** What the numbers count, e.g. "slots". */
  unit: string;
  high?: number;
  /** More text under the gauge (read by everyone). */
  children?: ComponentChildren;
}) {
  const share = max > 0 ? Math.min(value / max, 1) : value > 0 ? 1 : 0;
  const percent = max > 0 ? (value / max) * 100 : value > 0 ? 100 : 0;
  const shown = percent > 0 && percent < 1 ? '<1' : String(Math.round(percent));
  const number = new Intl.NumberFormat();
  const text = `${label}: ${number.format(value)} of ${number.format(max)} ${unit} (${shown} %)`;
  return (
    <div class="ov-gauge">
      <svg class="gauge" viewBox="0 0 200 120" role="img" aria-label={text} focusable="false">
        <title>{text}</title>
        <path class="track" d={ARC} fill="none" stroke-width="18" />
        <path class="ov-gauge-edge" d="M 11 100 A 89 89 0 0 1 189 100" />
        <path class="ov-gauge-edge" d="M 29 100 A 71 71 0 0 1 171 100" />
        {share > 0 && (
          <path
            class={share >= high ? 'fill high' : 'fill'}
            d={ARC}
            fill="none"
            stroke-width="18"
            pathLength={100}
            stroke-dasharray={`${share * 100} 100`}
          />
        )}
        <text x="100" y="88" text-anchor="middle" font-size="26" font-weight="700">
          {shown} %
        </text>
        <text x="100" y="114" text-anchor="middle" font-size="13">
          {number.format(value)} / {number.format(max)}
        </text>
      </svg>
      {children}
    </div>
  );
}
