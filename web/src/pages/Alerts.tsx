import { useState } from 'react';
import { qs, type Alert } from '../api';
import { formatTime, type Lang } from '../format';
import { useI18n, type Key } from '../i18n';
import { Badge, Empty, ErrorBox, Labels, Loading, Page, useLoad } from '../ui';

const STATES = ['firing', 'pending', 'resolved'] as const;

/** The summary in the UI's language (the server also localizes `summary` by Accept-Language). */
export function alertSummary(a: Alert, lang: Lang): string {
  if (lang === 'zh-CN' && a.summary_zh) return a.summary_zh;
  return a.summary || a.rule;
}

export function AlertTable({ alerts, compact }: { alerts: Alert[]; compact?: boolean }) {
  const { t, lang } = useI18n();
  return (
    <table className="table" data-testid="alerts">
      <thead>
        <tr>
          <th>{t('alerts.severity')}</th><th>{t('alerts.summary')}</th>
          {!compact && <><th>{t('common.labels')}</th><th>{t('alerts.started')}</th><th>{t('alerts.firingAt')}</th>
            <th>{t('alerts.resolvedAt')}</th><th>{t('alerts.deliveries')}</th></>}
          {compact && <th>{t('alerts.firingAt')}</th>}
        </tr>
      </thead>
      <tbody>
        {alerts.map((a) => (
          <tr key={a.id} data-alert={a.fingerprint || a.id} data-state={a.state}>
            <td><Badge kind={a.severity}>{t(`severity.${a.severity}` as Key) ?? a.severity}</Badge></td>
            <td data-testid="alert-summary">{alertSummary(a, lang)}<div className="muted small">{a.rule}</div></td>
            {!compact && <>
              <td><Labels labels={a.labels} /></td>
              <td>{formatTime(a.started_at, lang)}</td>
              <td>{formatTime(a.firing_at, lang)}</td>
              <td>{formatTime(a.resolved_at, lang)}</td>
              <td>{(a.deliveries ?? []).length === 0 ? '—' : a.deliveries.map((d) => (
                <div key={`${d.receiver}|${d.notify}`} className="small" title={d.delivered_at ? formatTime(d.delivered_at, lang) : d.next_at ? `→ ${formatTime(d.next_at, lang)}` : undefined}>
                  <Badge kind={d.state === 'ok' ? 'succeeded' : d.state === 'failed' ? 'failed' : 'queued'}>{d.state}</Badge>{' '}
                  {d.receiver}{d.notify ? ` (${d.notify})` : ''} ×{d.attempts}{d.last_error ? ` — ${d.last_error}` : ''}
                </div>))}</td>
            </>}
            {compact && <td>{formatTime(a.firing_at || a.started_at, lang)}</td>}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

interface Result { items: Alert[]; next_cursor?: string }

export function Alerts() {
  const { t } = useI18n();
  const [state, setState] = useState<(typeof STATES)[number]>('firing');
  const [cursor, setCursor] = useState('');
  const l = useLoad((api, signal) => api.get<Result>(`/api/v1/alerts${qs({ state, limit: 100, cursor })}`, signal),
    [state, cursor], 15000);

  return (
    <Page title={t('alerts.title')} actions={
      <div className="segmented">
        {STATES.map((s) => (
          <button key={s} className={s === state ? 'on' : ''} data-alert-state={s} onClick={() => { setState(s); setCursor(''); }}>
            {t(`alerts.${s}` as Key)}
          </button>
        ))}
      </div>}>
      <div className="card">
        {!l.data ? (l.error ? <ErrorBox error={l.error} retry={l.reload} /> : <Loading />)
          : l.data.items.length === 0 ? <Empty>{t('alerts.empty')}</Empty>
              : <>
                <AlertTable alerts={l.data.items} />
                <div className="row">
                  {cursor && <button onClick={() => setCursor('')}>{t('common.first')}</button>}
                  {l.data.next_cursor && <button onClick={() => setCursor(l.data!.next_cursor!)}>{t('common.next')}</button>}
                </div>
              </>}
      </div>
    </Page>
  );
}
