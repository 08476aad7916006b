// Colour scale of the overview heatmap: pure functions, unit-tested.

export type HeatMetric = 'gpu_utilization' | 'allocation' | 'queue_wait_s' | 'failure_rate';

/** Blues for how full the GPUs are; green to red for waiting and failing. */
export const SCALES: Record<'fill' | 'bad', string[]> = {
  fill: ['#eef4fb', '#8fb8e6', '#2c6fbb', '#123e73'],
  bad: ['#e8f5e9', '#fff59d', '#ffb74d', '#d32f2f'],
};

export function scaleOf(metric: HeatMetric): string[] {
  return metric === 'gpu_utilization' || metric === 'allocation' ? SCALES.fill : SCALES.bad;
}

/** The value range a metric's colours span: percentages 0..100, the rest up to the data's maximum. */
export function rangeOf(metric: HeatMetric, max: number): [number, number] {
  if (metric === 'failure_rate') return [0, Math.max(max, 0.2)];
  if (metric === 'queue_wait_s') return [0, Math.max(max, 600)];
  return [0, 100];
}

function hex(c: string): [number, number, number] {
  const n = parseInt(c.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

/** The colour of v within [lo, hi] on a scale of evenly spaced stops (clamped). */
export function colorAt(v: number, [lo, hi]: [number, number], stops: string[]): string {
  const f = hi > lo ? Math.min(1, Math.max(0, (v - lo) / (hi - lo))) : 0;
  const pos = f * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(pos));
  const a = hex(stops[i]!);
  const b = hex(stops[i + 1]!);
  const k = pos - i;
  const mix = a.map((x, j) => Math.round(x + (b[j]! - x) * k));
  return `rgb(${mix[0]}, ${mix[1]}, ${mix[2]})`;
}
