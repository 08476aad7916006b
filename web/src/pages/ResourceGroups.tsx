import type { ResourceGroupDoc } from '../api';
import { formatDuration, formatResource, parseQuantity, resourceLabel } from '../format';
import { useI18n } from '../i18n';
import { Empty, Labels, Page, Show, useLoad, useNow } from '../ui';

export function ResourceGroups() {
  const { t } = useI18n();
  const l = useLoad((api, s) => api.get<{ items: ResourceGroupDoc[] }>('/api/v1/resource-groups', s), [], 10000);
  return (
    <Page title={t('rg.title')}>
      <Show l={l}>{(d) => d.items.length === 0 ? <Empty>{t('rg.empty')}</Empty> : (
        <div className="stack">{d.items.map((g) => <GroupCard key={g.metadata.name} g={g} />)}</div>
      )}</Show>
    </Page>
  );
}

function GroupCard({ g }: { g: ResourceGroupDoc }) {
  const { t, lang } = useI18n();
  const now = useNow();
  const marks = g.spec.alerts?.thresholds?.length ? g.spec.alerts.thresholds : [70, 85, 95];
  const used = g.status?.used ?? {};
  const names = [...new Set([...Object.keys(g.spec.quota ?? {}), ...Object.keys(used)])].sort((a, b) => {
    const rank = (n: string) => (n.startsWith('gpu') ? 0 : n === 'cpu' ? 1 : n === 'memory' ? 2 : 3);
    return rank(a) - rank(b) || a.localeCompare(b);
  });
  const oldest = g.status?.oldest_queued_at ?? 0;
  const borrowed = Object.entries(g.status?.borrowed ?? {}).filter(([, v]) => parseQuantity(v) > 0);
  const lent = Object.entries(g.status?.lent ?? {}).filter(([, v]) => parseQuantity(v) > 0);
  return (
    <div className="card" data-testid={`rg-${g.metadata.name}`}>
      <div className="card-head">
        <h2>{g.metadata.name}</h2>
        <div className="stats inline">
          <div className="stat"><span>{t('rg.queued')}</span><strong>{g.status?.queued ?? 0}</strong></div>
          <div className="stat"><span>{t('rg.running')}</span><strong>{g.status?.running ?? 0}</strong></div>
          <div className="stat"><span>{t('rg.oldestWait')}</span>
            <strong>{oldest ? formatDuration((now - oldest) / 1000, lang) : '—'}</strong></div>
        </div>
      </div>
      <dl className="facts">
        <dt>{t('rg.clusters')}</dt><dd>{g.spec.clusters.join(', ') || '—'}</dd>
        {g.spec.cohort && <><dt>{t('rg.cohort')}</dt><dd>{g.spec.cohort}</dd></>}
        <dt>{t('rg.placement')}</dt><dd>{g.spec.placement}</dd>
        {borrowed.length > 0 && <><dt>{t('rg.borrowed')}</dt>
          <dd><Labels labels={Object.fromEntries(borrowed.map(([k, v]) => [resourceLabel(k, lang), formatResource(k, v, lang)]))} /></dd></>}
        {lent.length > 0 && <><dt>{t('rg.lent')}</dt>
          <dd><Labels labels={Object.fromEntries(lent.map(([k, v]) => [resourceLabel(k, lang), formatResource(k, v, lang)]))} /></dd></>}
      </dl>
      <div className="bars">
        {names.map((n) => (
          <QuotaBar key={n} name={n} used={parseQuantity(used[n] ?? '0')}
            guaranteed={parseQuantity(g.spec.quota?.[n]?.guaranteed ?? '')}
            max={parseQuantity(g.spec.quota?.[n]?.max ?? '')} marks={marks} />
        ))}
      </div>
      <p className="muted small">{t('rg.watermarks', { marks: marks.map((m) => `${m}%`).join(' / ') })}</p>
    </div>
  );
}

export function QuotaBar({ name, used, guaranteed, max, marks }: {
  name: string; used: number; guaranteed: number; max: number; marks: number[];
}) {
  const { t, lang } = useI18n();
  const g = Number.isNaN(guaranteed) ? 0 : guaranteed;
  const m = Number.isNaN(max) ? 0 : max;
  const u = Number.isNaN(used) ? 0 : used;
  const scale = Math.max(g, m, u, 1e-9) * 1.05;
  const pct = (v: number) => `${Math.min(100, (v / scale) * 100)}%`;
  const ratio = g > 0 ? (u / g) * 100 : 0;
  const sorted = [...marks].sort((a, b) => a - b);
  const level = sorted.filter((w) => ratio >= w).length; // 0..marks
  const fmt = (v: number) => formatResource(name, v, lang);
  return (
    <div className="qbar" data-testid={`bar-${name}`}>
      <div className="qbar-label">
        <strong>{resourceLabel(name, lang)}</strong>
        <span className="muted">
          {t('rg.used')} {fmt(u)} · {t('rg.guaranteed')} {g ? fmt(g) : '—'}{m ? ` · ${t('rg.max')} ${fmt(m)}` : ''}
          {g > 0 ? ` (${Math.round(ratio)}%)` : ''}
        </span>
      </div>
      <div className="qbar-track" role="meter" aria-valuenow={u} aria-valuemin={0} aria-valuemax={m || g}
        aria-label={resourceLabel(name, lang)}>
        {m > g && <div className="qbar-borrow" style={{ left: pct(g), width: `calc(${pct(m)} - ${pct(g)})` }} />}
        <div className={`qbar-fill level-${level}`} style={{ width: pct(u) }} />
        {g > 0 && sorted.map((w) => (
          <div key={w} className={`qbar-mark mark-${w}`} style={{ left: pct((g * w) / 100) }} title={`${w}%`} />
        ))}
        {g > 0 && <div className="qbar-guaranteed" style={{ left: pct(g) }} title={t('rg.guaranteed')} />}
        {m > 0 && <div className="qbar-max" style={{ left: pct(m) }} title={t('rg.max')} />}
      </div>
    </div>
  );
}
