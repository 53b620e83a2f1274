/**
 * HTML for the server-rendered pages, escaped by default: every value interpolated into `html`…``
 * is escaped unless it is itself `Html` (a fragment built the same way). Item names carry quotes,
 * `|`, `★` and whatever an upstream marketplace invents; a page must show them, never run them.
 */

export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for an element's content or a quoted attribute value. */
export const escapeHtml = (value: string): string => value.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);

function render(value: unknown): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/** A template whose interpolations are escaped (arrays are joined, null/undefined/false omitted). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] as string;
  values.forEach((v, i) => (out += render(v) + (strings[i + 1] as string)));
  return new Html(out);
}

/** Trusted markup as it is (constants of this module's callers only, never input). */
export const raw = (text: string): Html => new Html(text);

export interface ChartPoint {
  /** The x label (a date). */
  label: string;
  /** A decimal string as stored (a price). */
  value: string;
}

export interface ChartOptions {
  /** @default 720 */
  width: number;
  /** @default 240 */
  height: number;
  /** Room for the axis labels. @default 56 */
  pad: number;
  /** Appended to the y labels (a currency). @default '' */
  unit: string;
}

const DEFAULT_CHART: ChartOptions = { width: 720, height: 240, pad: 56, unit: '' };

/**
 * An inline SVG line chart, points evenly spaced in their given order (daily closes: a missing day
 * is missing, not interpolated). Values become numbers only to place pixels; the labels show the
 * stored decimal strings, so no price shown here went through a float.
 */
export function lineChart(points: readonly ChartPoint[], options: Partial<ChartOptions> = {}): Html {
  const o = { ...DEFAULT_CHART, ...options };
  const { width: w, height: h, pad } = o;
  if (points.length === 0)
    return html`<svg
      class="chart"
      xmlns="http://www.w3.org/2000/svg"
      viewBox="0 0 ${w} ${h}"
      role="img"
      aria-label="no data"
    >
      <text x="${w / 2}" y="${h / 2}" text-anchor="middle">no data</text>
    </svg>`;
  const ys = points.map((p) => Number(p.value));
  let lo = 0;
  let hi = 0;
  ys.forEach((y, i) => {
    if (y < (ys[lo] as number)) lo = i;
    if (y > (ys[hi] as number)) hi = i;
  });
  const min = ys[lo] as number;
  const max = ys[hi] as number;
  const span = max - min || 1;
  const x = (i: number) => (points.length === 1 ? w / 2 : pad + ((w - 2 * pad) * i) / (points.length - 1));
  // A flat series sits in the middle rather than on an edge.
  const y = (v: number) => (max === min ? h / 2 : h - pad / 2 - ((h - pad) * (v - min)) / span);
  const round = (n: number) => Math.round(n * 10) / 10;
  const d = ys.map((v, i) => `${i === 0 ? 'M' : 'L'}${round(x(i))} ${round(y(v))}`).join(' ');
  const first = points[0] as ChartPoint;
  const last = points[points.length - 1] as ChartPoint;
  const unit = o.unit ? ` ${o.unit}` : '';
  return html`<svg
    class="chart"
    xmlns="http://www.w3.org/2000/svg"
    viewBox="0 0 ${w} ${h}"
    role="img"
    aria-label="${`${points.length} points from ${first.label} to ${last.label}`}"
  >
    <line x1="${pad}" y1="${h - pad / 2}" x2="${w - pad}" y2="${h - pad / 2}" stroke="#bbb" />
    <text x="4" y="${round(y(max)) + 4}" font-size="11">${(points[hi] as ChartPoint).value}${unit}</text>
    ${max === min ? '' : html`<text x="4" y="${round(y(min)) + 4}" font-size="11">${(points[lo] as ChartPoint).value}${unit}</text>`}
    <text x="${pad}" y="${h - 4}" font-size="11">${first.label}</text>
    <text x="${w - pad}" y="${h - 4}" font-size="11" text-anchor="end">${last.label}</text>
    <path d="${d}" data-points="${points.length}" fill="none" stroke="#2563eb" stroke-width="2" />
    ${points.length === 1 ? html`<circle cx="${round(x(0))}" cy="${round(y(min))}" r="3" fill="#2563eb" />` : ''}
  </svg>`;
}
