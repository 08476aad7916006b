import { describe, expect, it } from 'vitest';
import { colorAt, rangeOf, SCALES } from './heatmap';

describe('heatmap colour scale', () => {
  it('maps the ends of the range to the first and last stops', () => {
    expect(colorAt(0, [0, 100], SCALES.fill)).toBe('rgb(238, 244, 251)');
    expect(colorAt(100, [0, 100], SCALES.fill)).toBe('rgb(18, 62, 115)');
  });
  it('clamps values outside the range', () => {
    expect(colorAt(-5, [0, 100], SCALES.bad)).toBe(colorAt(0, [0, 100], SCALES.bad));
    expect(colorAt(500, [0, 100], SCALES.bad)).toBe('rgb(211, 47, 47)');
  });
  it('interpolates between stops', () => {
    expect(colorAt(50, [0, 100], ['#000000', '#ffffff'])).toBe('rgb(128, 128, 128)');
  });
  it('widens the range of open-ended metrics to the data', () => {
    expect(rangeOf('allocation', 7)).toEqual([0, 100]);
    expect(rangeOf('queue_wait_s', 60)).toEqual([0, 600]);
    expect(rangeOf('queue_wait_s', 3600)).toEqual([0, 3600]);
    expect(rangeOf('failure_rate', 0.5)).toEqual([0, 0.5]);
  });
});
