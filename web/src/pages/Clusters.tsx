import { useState } from 'react';
import { ApiError, type Cluster, type Node } from '../api';
import { formatBytes, formatCpu, formatRelative, formatTime, jobCheck, parseQuantity } from '../format';
import { useI18n, type Key } from '../i18n';
import { Badge, Empty, ErrorBox, Labels, Page, Show, useLoad, useNow, useSession } from '../ui';

export function Clusters() {
  const { t } = useI18n();
  const l = useLoad((api, s) => api.get<{ items: Cluster[] }>('/api/v1/clusters', s), [], 15000);
  const [open, setOpen] = useState<Record<string, boolean>>({});
  return (
    <Page title={t('clusters.title')}>
      <Show l={l}>{(d) => d.items.length === 0 ? <Empty>{t('clusters.empty')}</Empty> : (
        <div className="stack">
          {d.items.map((c) => (
            <ClusterCard key={c.id} cluster={c} open={!!open[c.id]}
              toggle={() => setOpen((o) => ({ ...o, [c.id]: !o[c.id] }))} reload={l.reload} />
          ))}
        </div>
      )}</Show>
    </Page>
  );
}

function stateKey(s: string): Key {
  return (['online', 'offline', 'draining', 'degraded'].includes(s) ? `state.${s}` : 'state.unknown') as Key;
}

function ClusterCard({ cluster: c, open, toggle, reload }:
  { cluster: Cluster; open: boolean; toggle: () => void; reload: () => void }) {
  const { t, lang } = useI18n();
  const now = useNow();
  const credSoon = c.credential_expires_at > 0 && c.credential_expires_at - now < 24 * 3600 * 1000;
  return (
    <div className="card" data-testid={`cluster-${c.id}`}>
      <div className="card-head">
        <h2>{c.display_name || c.id} <span className="muted small">{c.id}</span></h2>
        <Badge kind={c.state}>{t(stateKey(c.state))}</Badge>
      </div>
      <dl className="facts">
        <dt>{t('clusters.reason')}</dt>
        <dd>{c.state_reason || c.state_message ? `${c.state_reason}${c.state_message ? ` — ${c.state_message}` : ''}` : '—'}</dd>
        <dt>{t('clusters.credential')}</dt>
        <dd className={credSoon ? 'warn' : ''} title={formatTime(c.credential_expires_at, lang)}>
          {formatRelative(c.credential_expires_at, now, lang)}</dd>
        <dt>{t('clusters.lastContact')}</dt>
        <dd title={formatTime(c.last_contact, lang)}>{formatRelative(c.last_contact, now, lang)}</dd>
        <dt>{t('clusters.executor')}</dt><dd>{c.executor}</dd>
        <dt>{t('common.labels')}</dt><dd><Labels labels={c.labels} /></dd>
        {(c.unknown_attempts ?? 0) > 0 && <>
          <dt>{t('clusters.unknownAttempts')}</dt>
          <dd className="warn" data-testid={`unknown-${c.id}`}><UnknownAttempts cluster={c} reload={reload} /></dd>
        </>}
      </dl>
      <button onClick={toggle}>{open ? t('clusters.hideNodes') : t('clusters.showNodes')}</button>
      {open && <NodeTable cluster={c.id} />}
    </div>
  );
}

/** A silent cluster's Unknown attempts: what to check, and for platform admins the confirm-lost button. */
function UnknownAttempts({ cluster: c, reload }: { cluster: Cluster; reload: () => void }) {
  const { t, lang } = useI18n();
  const { api, isAdmin } = useSession();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const vars = { n: c.unknown_attempts ?? 0, check: jobCheck(c.executor), id: c.id };

  async function confirmLost() {
    if (!window.confirm(t('clusters.confirmLostPrompt', vars))) return;
    setBusy(true);
    setError(undefined);
    try {
      const r = await api.json<{ message: string; message_zh: string }>(
        'POST', `/api/v1/clusters/${encodeURIComponent(c.id)}/confirm-lost`);
      window.alert(lang === 'zh-CN' && r.message_zh ? r.message_zh : r.message);
      reload();
    } catch (e) {
      if (e instanceof ApiError) setError(e);
    } finally {
      setBusy(false);
    }
  }

  return <>
    {t('clusters.unknownHint', vars)}
    {isAdmin && c.state === 'offline' && (
      <button className="small-btn" data-testid={`confirm-lost-${c.id}`} disabled={busy} onClick={confirmLost}>
        {t('clusters.confirmLost')}</button>
    )}
    {error && <ErrorBox error={error} />}
  </>;
}

function gpuText(n: Node): string {
  const parts = Object.entries(n.capacity ?? {}).filter(([k]) => k.startsWith('gpu/'))
    .map(([k, v]) => `${parseQuantity(v)} × ${k.slice(4)}`);
  return parts.length ? parts.join(', ') : '—';
}

function NodeTable({ cluster }: { cluster: string }) {
  const { t, lang } = useI18n();
  const { isAdmin } = useSession();
  // A page of nodes, grown on request up to the API's largest page: no
  // request returns every node of a 10,000-node cluster.
  const [limit, setLimit] = useState(100);
  const l = useLoad((api, s) => api.get<{ items: Node[]; next_cursor?: string }>(
    `/api/v1/nodes?cluster=${encodeURIComponent(cluster)}&limit=${limit}`, s), [cluster, limit], 15000);
  const { api } = useSession();
  const [busy, setBusy] = useState('');
  const [error, setError] = useState<ApiError>();

  async function toggle(n: Node) {
    setBusy(n.name);
    setError(undefined);
    try {
      await api.json('PATCH', `/api/v1/clusters/${encodeURIComponent(cluster)}/nodes/${encodeURIComponent(n.name)}`,
        { maintenance: !n.maintenance });
      l.reload();
    } catch (e) {
      if (e instanceof ApiError) setError(e);
    } finally {
      setBusy('');
    }
  }

  return (
    <Show l={l}>{(d) => d.items.length === 0 ? <Empty>{t('nodes.empty')}</Empty> : (
      <>
        {error && <ErrorBox error={error} />}
        <table className="table" data-testid={`nodes-${cluster}`}>
          <thead><tr>
            <th>{t('common.name')}</th><th>{t('nodes.gpus')}</th><th>{t('nodes.cpu')}</th><th>{t('nodes.memory')}</th>
            <th>{t('common.labels')}</th><th>{t('nodes.ready')}</th><th>{t('nodes.maintenance')}</th><th>{t('nodes.drift')}</th>
          </tr></thead>
          <tbody>
            {d.items.map((n) => (
              <tr key={n.name}>
                <td>{n.name}</td>
                <td>{gpuText(n)}</td>
                <td>{n.allocatable?.cpu ? formatCpu(n.allocatable.cpu) : '—'}</td>
                <td>{n.allocatable?.memory ? formatBytes(parseQuantity(n.allocatable.memory)) : '—'}</td>
                <td><Labels labels={n.effective_labels ?? n.labels} /></td>
                <td>{n.ready ? <Badge kind="online">{t('common.yes')}</Badge>
                  : <Badge kind="offline">{t('nodes.notReady')}{n.not_ready_reason ? `: ${n.not_ready_reason}` : ''}</Badge>}</td>
                <td>
                  {(n.in_maintenance ?? n.maintenance) ? <Badge kind="draining">{t('nodes.maintenance')}</Badge> : t('common.no')}
                  {isAdmin && (
                    <button className="small-btn" data-testid={`maint-${n.name}`} disabled={busy === n.name}
                      onClick={() => toggle(n)}>
                      {n.maintenance ? t('nodes.leaveMaintenance') : t('nodes.enterMaintenance')}
                    </button>
                  )}
                </td>
                <td>{(n.drift ?? []).length === 0 ? '—' : n.drift.map((x, i) => (
                  <div key={i} className="warn small">⚠ {lang === 'zh-CN' && x.message_zh ? x.message_zh : x.message}</div>
                ))}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {d.next_cursor && (
          <p className="small muted" data-testid={`nodes-more-${cluster}`}>
            {t('nodes.showing', { n: d.items.length })}{' '}
            {limit < 1000
              ? <button className="small-btn" onClick={() => setLimit(Math.min(1000, limit + 100))}>{t('nodes.showMore')}</button>
              : t('nodes.useCli')}
          </p>
        )}
      </>
    )}</Show>
  );
}
