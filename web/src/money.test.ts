import { describe, expect, it } from 'vitest';
import { diffValues, flatten, formatMoney } from './format';

describe('money', () => {
  it('formats integer cents exactly', () => {
    expect(formatMoney(123456, 'USD')).toBe('1,234.56 USD');
    expect(formatMoney(0, 'USD')).toBe('0.00 USD');
    expect(formatMoney(5)).toBe('0.05');
    expect(formatMoney(100000000, 'EUR')).toBe('1,000,000.00 EUR');
    expect(formatMoney(-1999, 'USD')).toBe('-19.99 USD');
  });
});

describe('diffs', () => {
  it('flattens to dotted paths', () => {
    const f = flatten({ spec: { currency: 'USD', prices: [{ resource: 'cpu', per_hour: '1' }], tags: [] }, n: 3, x: null });
    expect([...f.entries()]).toEqual([
      ['spec.currency', 'USD'], ['spec.prices[0].resource', 'cpu'], ['spec.prices[0].per_hour', '1'],
      ['spec.tags', '[]'], ['n', '3'], ['x', 'null'],
    ]);
  });
  it('lists changed, added and removed fields', () => {
    const d = diffValues(
      { spec: { currency: 'USD', prices: [{ resource: 'cpu', per_hour: '1' }] }, old: true },
      { spec: { currency: 'EUR', prices: [{ resource: 'cpu', per_hour: '1' }, { resource: 'gpu', per_hour: '2' }] } },
    );
    expect(d).toEqual([
      { path: 'old', kind: 'removed', before: 'true' },
      { path: 'spec.currency', kind: 'changed', before: 'USD', after: 'EUR' },
      { path: 'spec.prices[1].per_hour', kind: 'added', after: '2' },
      { path: 'spec.prices[1].resource', kind: 'added', after: 'gpu' },
    ]);
    expect(diffValues(null, { a: 1 })).toEqual([{ path: 'a', kind: 'added', after: '1' }]);
    expect(diffValues({ a: 1 }, { a: 1 })).toEqual([]);
  });
});

describe('approval pair of a refused submit', async () => {
  const { approvalPair } = await import('./pages/Submit');
  it('takes the details, else the pipeline', () => {
    expect(approvalPair({ project_group: 'a', resource_group: 'b' }, '')).toEqual({ pg: 'a', rg: 'b' });
    expect(approvalPair({}, 'kind: Pipeline\nmetadata: {name: x, project_group: p}\nspec: {resource_group: r, steps: []}\n'))
      .toEqual({ pg: 'p', rg: 'r' });
    expect(approvalPair({}, 'metadata: [')).toEqual({ pg: '', rg: '' });
  });
});
