import { useMemo, useState } from 'react';
import { ApiError, qs, type Api, type StepAdvice, type UsageRow } from '../api';
import { formatBytes, formatMillicores, formatMoney, formatNumber } from '../format';
import { Chart } from '../chart';
import { useI18n, type Key } from '../i18n';
import { Empty, ErrorBox, Link, Page, Show, useLoad, useSession } from '../ui';

const GROUPS = ['project_group', 'resource_group', 'cluster', 'gpu_type', 'user'] as const;
const METRICS = ['gpu_hours', 'cpu_hours', 'memory_hours', 'attempts'] as const;
type Group = (typeof GROUPS)[number];
type Metric = (typeof METRICS)[number] | 'cost';

/** Whether the rows carry a cost (the server adds it when a price table exists). */
export function hasCost(rows: UsageRow[]): boolean {
  return rows.some((r) => typeof r.cost_cents === 'number');
}

export function metricValue(r: UsageRow, m: Metric): number {
  switch (m) {
    case 'gpu_hours': return Number(r.gpu_hours ?? r.gpu_seconds / 3600);
    case 'cpu_hours': return Number(r.cpu_core_seconds) / 3600;
    case 'memory_hours': return Number(r.memory_gib_seconds) / 3600;
    case 'attempts': return Number(r.attempts);
    case 'cost': return Number(r.cost_cents ?? 0) / 100;
  }
}

function isoDay(d: Date): string { return d.toISOString().slice(0, 10); }

interface Data { byMonth: UsageRow[]; byGroup: UsageRow[] }

export function Usage() {
  const { t } = useI18n();
  const { api } = useSession();
  const today = new Date();
  const [from, setFrom] = useState(isoDay(new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 5, 1))));
  const [to, setTo] = useState(isoDay(new Date(today.getTime() + 86400000)));
  const [group, setGroup] = useState<Group>('project_group');
  const [metric, setMetric] = useState<Metric>('gpu_hours');
  const [csvError, setCsvError] = useState<ApiError>();

  const l = useLoad(async (a: Api, signal): Promise<Data> => {
    const [byMonth, byGroup] = await Promise.all([
      a.get<{ items: UsageRow[] }>(`/api/v1/usage${qs({ from, to, group_by: `month,${group}` })}`, signal),
      a.get<{ items: UsageRow[] }>(`/api/v1/usage${qs({ from, to, group_by: group })}`, signal),
    ]);
    return { byMonth: byMonth.items, byGroup: byGroup.items };
  }, [from, to, group], 60000);

  async function downloadCsv() {
    setCsvError(undefined);
    try {
      const csv = await api.text(`/api/v1/usage${qs({ from, to, group_by: `month,${group}` })}`, 'text/csv');
      const url = URL.createObjectURL(new Blob([csv], { type: 'text/csv' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = `cubeplane-usage-${from}-${to}-${group}.csv`;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (e) {
      if (e instanceof ApiError) setCsvError(e);
    }
  }

  return (
    <Page title={t('usage.title')} actions={<button onClick={downloadCsv} data-testid="csv">{t('usage.csv')}</button>}>
      {csvError && <ErrorBox error={csvError} />}
      <div className="filters card">
        <label>{t('usage.from')}<input type="date" value={from} onChange={(e) => setFrom(e.target.value)} /></label>
        <label>{t('usage.to')}<input type="date" value={to} onChange={(e) => setTo(e.target.value)} /></label>
        <label>{t('usage.groupBy')}
          <select value={group} onChange={(e) => setGroup(e.target.value as Group)}>
            {GROUPS.map((g) => <option key={g} value={g}>{t(`usage.group.${g}` as Key)}</option>)}
          </select>
        </label>
        <label>{t('usage.metric')}
          <select value={metric} onChange={(e) => setMetric(e.target.value as Metric)}>
            {METRICS.map((m) => <option key={m} value={m}>{t(`usage.${m}` as Key)}</option>)}
            <option value="cost">{t('usage.cost')}</option>
          </select>
        </label>
      </div>
      <Show l={l}>{(d) => d.byGroup.length === 0 ? <div className="card"><Empty>{t('usage.empty')}</Empty></div> : (
        <UsageCharts data={d} group={group} metric={metric} />
      )}</Show>
      <RequestVsUse />
    </Page>
  );
}

/** Request against measured use per step over the last 14 days, with advice. */
function RequestVsUse() {
  const { t, lang } = useI18n();
  const l = useLoad((a: Api, signal) => a.get<{ items: StepAdvice[] }>(`/api/v1/usage/advice${qs({ days: 14 })}`, signal),
    [], 60000);
  return (
    <div className="card" data-testid="usage-advice">
      <h2>{t('usage.advice')}</h2>
      <p className="muted small">{t('usage.adviceHelp')}</p>
      <Show l={l}>{(d) => d.items.length === 0 ? <Empty>{t('usage.adviceEmpty')}</Empty> : (
        <table className="table">
          <thead><tr>
            <th>{t('usage.group.project_group')}</th><th>{t('usage.step')}</th><th className="num">{t('usage.attempts')}</th>
            <th className="num">{t('usage.cpuReq')}</th><th className="num">{t('usage.cpuP95')}</th>
            <th className="num">{t('usage.memReq')}</th><th className="num">{t('usage.memPeak')}</th>
            <th className="num">{t('usage.gpuP95')}</th><th>{t('usage.adviceCol')}</th>
          </tr></thead>
          <tbody>{d.items.map((s) => (
            <tr key={`${s.project_group}/${s.step}`} data-testid={`advice-${s.step}`}>
              <td>{s.project_group}</td><td>{s.step}</td><td className="num">{s.attempts}</td>
              <td className="num">{formatMillicores(s.request.cpu_milli)}</td>
              <td className="num">{formatMillicores(s.cpu.p95_milli)}</td>
              <td className="num">{formatBytes(s.request.memory_bytes)}</td>
              <td className="num">{formatBytes(s.memory.max_bytes)}</td>
              <td className="num">{s.gpu ? `${s.gpu.utilization_p95}%` : '—'}</td>
              <td>{s.advice.length === 0 ? <span className="muted">{t('usage.adviceFine')}</span>
                : s.advice.map((a, i) => (
                  <div key={i} className={a.kind === 'raise' ? 'warn' : ''}>{lang === 'zh-CN' && a.message_zh ? a.message_zh : a.message}</div>
                ))}</td>
            </tr>
          ))}</tbody>
        </table>
      )}</Show>
    </div>
  );
}

function UsageCharts({ data, group, metric }: { data: Data; group: Group; metric: Metric }) {
  const { t } = useI18n();
  const none = t('common.none');
  const name = (r: UsageRow) => String(r[group] ?? '') || none;
  const cost = hasCost(data.byGroup);
  const currency = String(data.byGroup.find((r) => r.currency)?.currency ?? '');
  // Integer cents summed exactly.
  const totalCents = data.byGroup.reduce((s, r) => s + Number(r.cost_cents ?? 0), 0);
  const shown: Metric = metric === 'cost' && !cost ? 'gpu_hours' : metric;
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const monthOption = useMemo(() => monthChart(data, shown), [data, group, shown, currency, t]);
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const costOption = useMemo(() => (cost ? monthChart(data, 'cost') : null), [data, group, cost, currency, t]);
  function monthChart(data: Data, metric: Metric) {
    const months = [...new Set(data.byMonth.map((r) => String(r.month)))].sort();
    const groups = [...new Set(data.byMonth.map(name))].sort();
    return {
      tooltip: { trigger: 'axis' },
      legend: { type: 'scroll', top: 0 },
      grid: { left: 60, right: 20, top: 40, bottom: 30 },
      xAxis: { type: 'category', data: months },
      yAxis: { type: 'value', name: metric === 'cost' ? currency : t(`usage.${metric}` as Key) },
      series: groups.map((g) => ({
        name: g, type: 'bar', stack: 'total',
        data: months.map((m) => data.byMonth.filter((r) => String(r.month) === m && name(r) === g)
          .reduce((s, r) => s + metricValue(r, metric), 0)),
      })),
    };
  }
  const groupOption = useMemo(() => {
    const metric = shown;
    const rows = [...data.byGroup].sort((a, b) => metricValue(b, metric) - metricValue(a, metric));
    return {
      tooltip: { trigger: 'axis' },
      grid: { left: 140, right: 30, top: 10, bottom: 30 },
      xAxis: { type: 'value', name: metric === 'cost' ? currency : t(`usage.${metric}` as Key) },
      yAxis: { type: 'category', data: rows.map(name).reverse() },
      series: [{ type: 'bar', data: rows.map((r) => metricValue(r, metric)).reverse(), itemStyle: { color: '#2c6fbb' } }],
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [data, group, shown, t]);
  return (
    <>
      {cost ? (
        <div className="card stats" data-testid="usage-total-cost">
          <div className="stat"><span>{t('usage.totalCost')}</span><strong>{formatMoney(totalCents, currency)}</strong></div>
        </div>
      ) : (
        <div className="card muted small" data-testid="usage-no-prices">{t('usage.noPrices')} <Link to="/prices">{t('nav.prices')} →</Link></div>
      )}
      <div className="grid2">
        <div className="card"><h2>{t('usage.byMonth')}</h2><Chart option={monthOption} testId="usage-month" /></div>
        {costOption && <div className="card"><h2>{t('usage.cost')} · {t('usage.byMonth')}</h2><Chart option={costOption} testId="usage-cost" /></div>}
        <div className="card"><h2>{t('usage.byGroup')}</h2>
          <Chart option={groupOption} height={Math.max(200, 60 + data.byGroup.length * 26)} testId="usage-group" /></div>
      </div>
      <div className="card">
        <table className="table" data-testid="usage-table">
          <thead><tr>
            <th>{t(`usage.group.${group}` as Key)}</th>
            {METRICS.map((m) => <th key={m} className="num">{t(`usage.${m}` as Key)}</th>)}
            {cost && <th className="num">{t('usage.cost')}</th>}
          </tr></thead>
          <tbody>{data.byGroup.map((r, i) => (
            <tr key={i}><td>{name(r)}</td>
              {METRICS.map((m) => <td key={m} className="num">{formatNumber(metricValue(r, m), m === 'attempts' ? 0 : 2)}</td>)}
              {cost && <td className="num" data-testid="usage-cost-cell">{typeof r.cost_cents === 'number' ? formatMoney(r.cost_cents, String(r.currency ?? currency)) : '—'}</td>}</tr>
          ))}</tbody>
        </table>
      </div>
    </>
  );
}
