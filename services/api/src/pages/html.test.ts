import { describe, expect, it } from 'vitest';
import { escapeHtml, html, lineChart, raw } from './html.js';

describe('html', () => {
  it('escapes every interpolation unless it is Html; joins arrays; omits null, undefined and false', () => {
    const name = `StatTrak™ M9 Bayonet | "Doppler" <script>alert('x')</script> & ★`;
    expect(html`<td title="${name}">${name}</td>`.text).toBe(
      '<td title="StatTrak™ M9 Bayonet | &quot;Doppler&quot; &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; ★">' +
        'StatTrak™ M9 Bayonet | &quot;Doppler&quot; &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; ★</td>',
    );
    // prettier-ignore
    expect(html`<ul>${['a<', 'b'].map((x) => html`<li>${x}</li>`)}</ul>`.text).toBe('<ul><li>a&lt;</li><li>b</li></ul>');
    expect(html`${null}${undefined}${false}${0}${raw('<b>')}`.text).toBe('0<b>');
    expect(escapeHtml(`'"<>&`)).toBe('&#39;&quot;&lt;&gt;&amp;');
  });
});

describe('lineChart', () => {
  const pathOf = (svg: string) => /<path d="([^"]+)"/.exec(svg)?.[1] ?? '';

  it('draws one path point per value, highest value at the top, labels are the stored decimal strings', () => {
    const svg = lineChart(
      [
        { label: '2026-11-18', value: '10.10' },
        { label: '2026-11-19', value: '12.50' },
        { label: '2026-11-20', value: '9.99' },
      ],
      { unit: 'CNY' },
    ).text;
    const points = pathOf(svg)
      .split(/[ML]/)
      .filter(Boolean)
      .map((p) => p.trim().split(' ').map(Number) as [number, number]);
    expect(points).toHaveLength(3);
    expect(points.map(([x]) => x)).toEqual([...points.map(([x]) => x)].sort((a, b) => a - b));
    // SVG y grows downwards: 12.50 is highest, 9.99 lowest.
    expect(points[1]![1]).toBeLessThan(points[0]![1]);
    expect(points[2]![1]).toBeGreaterThan(points[0]![1]);
    expect(svg).toContain('>12.50 CNY</text>');
    expect(svg).toContain('>9.99 CNY</text>');
    expect(svg).toContain('data-points="3"');
    expect(svg).toContain('2026-11-18');
  });

  it('a flat series and a single point still draw; no points says so', () => {
    const flat = lineChart([
      { label: 'a', value: '5' },
      { label: 'b', value: '5' },
    ]).text;
    expect(pathOf(flat)).toMatch(/^M\S+ 120 L\S+ 120$/);
    expect(lineChart([{ label: 'a', value: '5' }]).text).toContain('<circle');
    expect(lineChart([]).text).toContain('no data');
  });
});
