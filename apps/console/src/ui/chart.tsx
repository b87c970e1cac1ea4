/**
 * A uPlot chart of values per UTC day, sized to its container (a ResizeObserver, so it fits from
 * 360 px wide) and drawn in the console's colours (read from the CSS variables, again when the
 * colour scheme changes). uPlot styles its elements through the CSSOM (`el.style.x = …`), which
 * the strict CSP (`style-src 'self'`) allows; it adds no inline `<style>`.
 *
 * The canvas is hidden from assistive technology: the caller passes the text alternative (a
 * summary and a table of the same numbers) as children, shown under the chart.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  /** One value per day of `days` (null: no value). */
  values: Array<number | null>;
  /** The CSS variable holding its colour, e.g. `--accent`. */
  colorVar: string;
  /** Bars (counts) or a line with points; the two differ in shape, not only in colour. */
  kind: 'bars' | 'line';
  /** Its y axis: left (the first series) or right. */
  side: 'left' | 'right';
  /** Whole numbers only on its axis. */
  integer?: boolean;
  format?: (value: number) => string;
}

const INTEGER_STEPS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7,
];
const dayFormat = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** Unix seconds at 00:00 UTC of a `YYYY-MM-DD` day. */
export function dayToUnix(day: string): number {
  return Date.parse(`${day}T00:00:00Z`) / 1000;
}

function colorOf(style: CSSStyleDeclaration, name: string, fallback: string): string {
  return style.getPropertyValue(name).trim() || fallback;
}

function optionsFor(el: HTMLElement, width: number, height: number, series: ChartSeries[]): uPlot.Options {
  const css = getComputedStyle(el);
  const fg = colorOf(css, '--fg', '#1b1f24');
  const line = colorOf(css, '--line', '#8a929c');
  const font = `12px ${css.fontFamily || 'system-ui, sans-serif'}`;
  const bars = uPlot.paths.bars?.({ size: [0.6, 48], align: 0 });
  return {
    width,
    height,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
    padding: [12, 8, 0, 4],
    cursor: { drag: { x: false, y: false }, points: { size: 8 } },
    legend: { live: true },
    scales: {
      // Half a day either side, so the first and last days' bars show whole.
      x: { time: true, range: (_u, min, max) => [min - 43_200, max + 43_200] },
      ...Object.fromEntries(
        series.map((s) => [
          s.side,
          {
            range: (_u: uPlot, _min: number, max: number): uPlot.Range.MinMax => [
              0,
              max > 0 ? max * 1.15 : 1,
            ],
          },
        ]),
      ),
    },
    axes: [
      {
        stroke: fg,
        font,
        grid: { show: false },
        ticks: { stroke: line, width: 1 },
        space: 56,
        values: (_u, splits) => splits.map((v) => dayFormat.format(new Date(v * 1000))),
      },
      ...series.map(
        (s): uPlot.Axis => ({
          scale: s.side,
          side: s.side === 'left' ? 3 : 1,
          label: s.label,
          labelFont: font,
          labelSize: 18,
          stroke: colorOf(css, s.colorVar, fg),
          font,
          size: 52,
          grid: { show: s.side === 'left', stroke: line, width: 1, dash: [2, 4] },
          ticks: { stroke: line, width: 1 },
          ...(s.integer ? { incrs: INTEGER_STEPS } : {}),
          values: (_u, splits) => splits.map((v) => (s.format ? s.format(v) : String(v))),
        }),
      ),
    ],
    series: [
      { label: 'Day (UTC)', value: (_u, v) => (v === null ? '—' : dayFormat.format(new Date(v * 1000))) },
      ...series.map((s): uPlot.Series => {
        const color = colorOf(css, s.colorVar, fg);
        return {
          label: s.label,
          scale: s.side,
          stroke: color,
          width: 2,
          value: (_u, v) => (v === null || v === undefined ? '—' : s.format ? s.format(v) : String(v)),
          ...(s.kind === 'bars' && bars
            ? { paths: bars, fill: color, points: { show: false } }
            : { points: { show: true, size: 6, fill: color, stroke: color } }),
        };
      }),
    ],
  };
}

/**
 * The chart in a figure: `caption` names it, `children` carry its text alternative. `days` are
 * `YYYY-MM-DD` UTC days; each series has one value per day.
 */
export function Chart({
  caption,
  days,
  series,
  height = 220,
  children,
}: {
  caption: string;
  days: string[];
  series: ChartSeries[];
  height?: number;
  children?: ComponentChildren;
}) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const data: uPlot.AlignedData = [days.map(dayToUnix), ...series.map((s) => s.values)];
    let plot: uPlot | undefined;
    let width = 0;
    const widthNow = () => Math.max(Math.floor(el.clientWidth), 200);
    const build = () => {
      plot?.destroy();
      width = widthNow();
      plot = new uPlot(optionsFor(el, width, height, series), data, el);
    };
    build();
    // Only the width follows the container; the height is fixed, so resizing cannot loop.
    const resize = new ResizeObserver(() => {
      const next = widthNow();
      if (plot && next !== width) {
        width = next;
        plot.setSize({ width, height });
      }
    });
    resize.observe(el);
    const scheme = matchMedia('(prefers-color-scheme: dark)');
    scheme.addEventListener('change', build);
    return () => {
      resize.disconnect();
      scheme.removeEventListener('change', build);
      plot?.destroy();
    };
  }, [days, series, height]);
  return (
    <figure class="ov-figure">
      <figcaption class="ov-figcaption">{caption}</figcaption>
      <div ref={box} class="chart" aria-hidden="true" />
      {children}
    </figure>
  );
}
