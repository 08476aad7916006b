import { useLayoutEffect, useMemo, useRef, useState, type MouseEvent } from 'react';
import type { Overview as OverviewData, OverviewCell } from '../api';
import { formatDuration, formatPercent, type Lang } from '../format';
import { colorAt, rangeOf, scaleOf, type HeatMetric } from '../heatmap';
import { useI18n, type Key } from '../i18n';
import { Empty, ErrorBox, Loading, Page, useLoad, useReadyMark } from '../ui';
import { AlertTable } from './Alerts';

// No charting library here: the heatmap is drawn on a plain canvas, so the
// overview paints without loading ECharts (which only the Usage page needs).

export const OVERVIEW_QUERY = '/api/v1/overview?hours=24';
const METRICS: HeatMetric[] = ['gpu_utilization', 'allocation', 'queue_wait_s', 'failure_rate'];

export function Overview() {
  const { t } = useI18n();
  const l = useLoad((api, signal) => api.get<OverviewData>(OVERVIEW_QUERY, signal), [], 30000, OVERVIEW_QUERY);
  const [metric, setMetric] = useState<HeatMetric>('gpu_utilization');
  useReadyMark('cp:overview-ready', !!l.data);

  if (!l.data) return <Page title={t('nav.overview')}>{l.error ? <ErrorBox error={l.error} retry={l.reload} /> : <Loading />}</Page>;
  const overview = l.data;
  const alerts = overview.alerts ?? [];
  return (
    <Page title={t('nav.overview')}>
      {l.error && <ErrorBox error={l.error} retry={l.reload} />}
      <div className="card">
        <div className="card-head">
          <h2>{t('overview.heatmap')}</h2>
          <div className="segmented" role="group" aria-label={t('overview.metric')}>
            {METRICS.map((m) => (
              <button key={m} className={m === metric ? 'on' : ''} data-metric={m}
                onClick={() => setMetric(m)}>{t(`overview.metric.${m}` as Key)}</button>
            ))}
          </div>
        </div>
        <Heatmap data={overview} metric={metric} />
      </div>
      <div className="grid2">
        <div className="card">
          <h2>{t('overview.totals')}</h2>
          <FleetTotals totals={overview.totals} />
        </div>
        <div className="card" data-testid="overview-alerts">
          <h2>{t('overview.firing')}</h2>
          {alerts.length === 0 ? <Empty>{t('overview.noFiring')}</Empty> : <AlertTable alerts={alerts} compact />}
        </div>
      </div>
    </Page>
  );
}

function formatValue(metric: HeatMetric, v: number, lang: Lang): string {
  if (metric === 'queue_wait_s') return formatDuration(v, lang);
  if (metric === 'failure_rate') return formatPercent(v * 100, 1);
  return formatPercent(v);
}

const ROW_H = 22; // px per cluster row (cell 20 + 2 gap)

interface Hover { x: number; y: number; left: number; top: number }

function Heatmap({ data, metric }: { data: OverviewData; metric: HeatMetric }) {
  const { t, lang } = useI18n();
  // Drawn on one canvas: 64 x 24 cells paint in a few milliseconds, where as many DOM
  // elements (or a charting library) would cost most of the 1 s first-paint budget.
  const canvas = useRef<HTMLCanvasElement>(null);
  const [width, setWidth] = useState(0);
  const [hover, setHover] = useState<Hover | null>(null);
  const view = useMemo(() => {
    let max = 0;
    let filled = 0;
    for (const c of data.clusters) for (const cell of c.cells) {
      const v = cell[metric as keyof OverviewCell];
      if (typeof v === 'number') { max = Math.max(max, v); filled++; }
    }
    const range = rangeOf(metric, max);
    const stops = scaleOf(metric);
    const loc = lang === 'zh-CN' ? 'zh-CN' : 'en-GB';
    const colFmt = new Intl.DateTimeFormat(loc, data.bucket_s >= 86400 ? { month: '2-digit', day: '2-digit' }
      : { hour: '2-digit', minute: '2-digit' });
    const cols = data.buckets.map((b) => colFmt.format(new Date(b)));
    const every = Math.max(1, Math.ceil(cols.length / 12));
    return { range, stops, cols, every, filled };
  }, [data, metric, lang]);

  useLayoutEffect(() => {
    const el = canvas.current;
    if (!el) return;
    const measure = () => setWidth(el.parentElement?.clientWidth ?? 0);
    measure();
    const ro = new ResizeObserver(measure);
    if (el.parentElement) ro.observe(el.parentElement);
    return () => ro.disconnect();
  }, []);

  const ncols = data.buckets.length;
  const height = data.clusters.length * ROW_H;
  useLayoutEffect(() => {
    const el = canvas.current;
    const ctx = el?.getContext('2d');
    if (!el || !ctx || !width || !ncols) return;
    const dpr = window.devicePixelRatio || 1;
    el.width = Math.round(width * dpr);
    el.height = Math.round(height * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const cw = width / ncols;
    let hatch: CanvasPattern | string = '#e3e7ec';
    const tile = document.createElement('canvas');
    tile.width = tile.height = 6;
    const tc = tile.getContext('2d');
    if (tc) {
      tc.fillStyle = '#f4f5f7'; tc.fillRect(0, 0, 6, 6);
      tc.strokeStyle = '#d3d8de'; tc.lineWidth = 1.5;
      tc.beginPath(); tc.moveTo(0, 6); tc.lineTo(6, 0); tc.stroke();
      hatch = ctx.createPattern(tile, 'repeat') ?? hatch;
    }
    data.clusters.forEach((c, y) => c.cells.forEach((cell, x) => {
      const v = cell[metric as keyof OverviewCell];
      ctx.fillStyle = typeof v === 'number' ? colorAt(v, view.range, view.stops) : hatch;
      ctx.fillRect(x * cw + 1, y * ROW_H + 1, Math.max(1, cw - 2), ROW_H - 2);
    }));
    if (hover) {
      ctx.strokeStyle = '#1d2733'; ctx.lineWidth = 2;
      ctx.strokeRect(hover.x * cw + 1, hover.y * ROW_H + 1, Math.max(1, cw - 2), ROW_H - 2);
    }
  }, [data, metric, view, width, height, ncols, hover]);

  if (!data.clusters.length) return <Empty>{t('overview.noClusters')}</Empty>;

  function onMove(e: MouseEvent<HTMLCanvasElement>) {
    const r = e.currentTarget.getBoundingClientRect();
    const x = Math.floor(((e.clientX - r.left) / r.width) * ncols);
    const y = Math.floor((e.clientY - r.top) / ROW_H);
    if (x < 0 || y < 0 || x >= ncols || y >= data.clusters.length) { setHover(null); return; }
    if (hover?.x !== x || hover?.y !== y) setHover({ x, y, left: e.clientX - r.left, top: e.clientY - r.top });
  }

  const [lo, hi] = view.range;
  const tip = hover ? (() => {
    const c = data.clusters[hover.y]!;
    const v = c.cells[hover.x]?.[metric as keyof OverviewCell];
    const when = new Date(data.buckets[hover.x]!).toLocaleString(lang === 'zh-CN' ? 'zh-CN' : 'en-GB');
    return { name: c.name || c.id, when, value: typeof v === 'number' ? formatValue(metric, v, lang) : t('overview.nodata') };
  })() : null;
  const lastOf = (c: OverviewData['clusters'][number]) => {
    const v = c.cells[c.cells.length - 1]?.[metric as keyof OverviewCell];
    return typeof v === 'number' ? String(v) : '';
  };
  return (
    <div data-testid="heatmap" data-metric-shown={metric} data-filled={view.filled}>
      <div className="heatmap">
        <div className="hm-names">
          <div className="hm-col" />
          {data.clusters.map((c) => (
            <div key={c.id} className="hm-name" data-cluster={c.id} data-last={lastOf(c)} title={`${c.name || c.id} (${c.state})`}>
              <span className={`dot dot-${c.state}`} />{c.name || c.id}
            </div>
          ))}
        </div>
        <div className="hm-plot">
          <div className="hm-cols" style={{ gridTemplateColumns: `repeat(${ncols}, 1fr)` }}>
            {view.cols.map((c, x) => <div key={x} className="hm-col">{x % view.every === 0 ? c : ''}</div>)}
          </div>
          <canvas ref={canvas} role="img" aria-label={t('overview.heatmap')} style={{ width: '100%', height }}
            onMouseMove={onMove} onMouseLeave={() => setHover(null)} />
          {hover && tip && (
            <div className="hm-tip" data-testid="heatmap-tip"
              style={{ left: Math.min(hover.left + 12, Math.max(0, width - 220)), top: hover.top + 34 }}>
              <strong>{tip.name}</strong><div>{tip.when}</div>
              <div>{t(`overview.metric.${metric}` as Key)}: {tip.value}</div>
            </div>
          )}
        </div>
      </div>
      <div className="hm-legend" data-testid="heatmap-legend">
        <span>{formatValue(metric, lo, lang)}</span>
        <span className="hm-ramp" style={{ background: `linear-gradient(to right, ${view.stops.join(', ')})` }} />
        <span>{formatValue(metric, hi, lang)}{metric === 'queue_wait_s' || metric === 'failure_rate' ? '+' : ''}</span>
        <span className="hm-swatch nodata" /> <span>{t('overview.nodata')}</span>
      </div>
    </div>
  );
}

function FleetTotals({ totals }: { totals: OverviewData['totals'] }) {
  const { t } = useI18n();
  return (
    <div>
      <div className="stats">
        <div className="stat"><span>{t('overview.nodes')}</span>
          <strong>{t('overview.nodesReady', { ready: totals.nodes_ready, total: totals.nodes })}</strong></div>
        <div className="stat"><span>{t('overview.queued')}</span><strong data-testid="tasks-queued">{totals.tasks_queued}</strong></div>
        <div className="stat"><span>{t('overview.running')}</span><strong data-testid="tasks-running">{totals.tasks_running}</strong></div>
      </div>
      {totals.gpus_by_type.length === 0 ? <Empty>{t('overview.noGpus')}</Empty> : (
        <table className="table" data-testid="gpu-totals">
          <thead><tr><th>{t('overview.gpuType')}</th><th>{t('overview.total')}</th>
            <th>{t('overview.allocated')}</th><th>{t('overview.idle')}</th></tr></thead>
          <tbody>
            {totals.gpus_by_type.map((g) => (
              <tr key={g.gpu_type} data-gpu-type={g.gpu_type}><td>{g.gpu_type}</td><td>{g.total}</td><td>{g.allocated}</td><td>{g.idle}</td></tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
