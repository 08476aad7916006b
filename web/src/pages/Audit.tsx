import { Fragment, useState } from 'react';
import { qs, type Api, type AuditEntry, type List } from '../api';
import { diffValues, flatten, formatTime, type FieldChange } from '../format';
import { useI18n, type Key } from '../i18n';
import { Badge, Empty, Page, Show, useLoad } from '../ui';

const PAGE = 50;

function nextDay(day: string): string {
  const d = new Date(`${day}T00:00:00Z`);
  return Number.isNaN(d.getTime()) ? day : new Date(d.getTime() + 86400000).toISOString().slice(0, 10);
}

export function Audit() {
  const { t, lang } = useI18n();
  const [user, setUser] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  // The cursors of the pages before this one ('' = the first page).
  const [cursors, setCursors] = useState<string[]>(['']);
  const cursor = cursors[cursors.length - 1] ?? '';
  const [open, setOpen] = useState<Record<string, boolean>>({});

  const l = useLoad((a: Api, signal) => a.get<List<AuditEntry>>(`/api/v1/audit${qs({
    user: user.trim(), from, to: to ? nextDay(to) : '', limit: PAGE, cursor,
  })}`, signal), [user, from, to, cursor]);
  const reset = () => setCursors(['']);

  return (
    <Page title={t('audit.title')}>
      <div className="filters card">
        <label>{t('audit.user')}<input data-testid="audit-user" value={user} onChange={(e) => { setUser(e.target.value); reset(); }} /></label>
        <label>{t('audit.from')}<input type="date" data-testid="audit-from" value={from} onChange={(e) => { setFrom(e.target.value); reset(); }} /></label>
        <label>{t('audit.to')}<input type="date" data-testid="audit-to" value={to} onChange={(e) => { setTo(e.target.value); reset(); }} /></label>
      </div>
      <Show l={l}>{(d) => (
        <div className="card">
          {d.items.length === 0 ? <Empty>{t('audit.empty')}</Empty> : (
            <table className="table" data-testid="audit-list">
              <thead><tr>
                <th>{t('audit.time')}</th><th>{t('audit.user')}</th><th>{t('audit.action')}</th>
                <th>{t('audit.status')}</th><th />
              </tr></thead>
              <tbody>{d.items.map((e) => (
                <Fragment key={e.id}>
                  <tr data-route={e.route} data-status={e.status}>
                    <td className="nowrap">{formatTime(e.at, lang)}</td>
                    <td>{e.user}</td>
                    <td><span className="mono small">{e.method}</span> {e.path}</td>
                    <td><Badge kind={e.status < 400 ? 'ok' : 'failed'}>{e.status} {e.status < 400 ? t('audit.ok') : t('audit.failed')}</Badge></td>
                    <td><button className="link" data-testid="audit-toggle"
                      onClick={() => setOpen((o) => ({ ...o, [e.id]: !o[e.id] }))}>{open[e.id] ? t('audit.hide') : t('audit.show')}</button></td>
                  </tr>
                  {open[e.id] && <tr className="expanded"><td colSpan={5}><AuditDetail e={e} /></td></tr>}
                </Fragment>
              ))}</tbody>
            </table>
          )}
          <div className="row">
            <button onClick={reset} disabled={cursors.length <= 1}>{t('common.first')}</button>
            <button data-testid="audit-next" disabled={!d.next_cursor}
              onClick={() => d.next_cursor && setCursors((c) => [...c, d.next_cursor!])}>{t('common.next')}</button>
          </div>
        </div>
      )}</Show>
    </Page>
  );
}

function AuditDetail({ e }: { e: AuditEntry }) {
  const { t } = useI18n();
  const hasState = (e.before !== null && e.before !== undefined) || (e.after !== null && e.after !== undefined);
  const changes = hasState ? diffValues(e.before, e.after) : [];
  const request = !hasState && e.request !== null && e.request !== undefined ? [...flatten(e.request).entries()] : [];
  return (
    <div className="audit-detail" data-testid="audit-detail">
      <div className="muted small">{t('audit.from_addr', { addr: e.remote_addr || '—', id: e.request_id || '—' })}</div>
      {e.error && <div className="state error small">{t('audit.error', { error: e.error })}</div>}
      {hasState && (changes.length === 0 ? <div className="muted">{t('audit.noChanges')}</div> : <DiffTable changes={changes} />)}
      {request.length > 0 && (
        <>
          <h3>{t('audit.request')}</h3>
          <table className="table diff"><tbody>
            {request.map(([k, v]) => <tr key={k}><td className="mono small">{k}</td><td className="mono small">{v}</td></tr>)}
          </tbody></table>
        </>
      )}
    </div>
  );
}

export function DiffTable({ changes }: { changes: FieldChange[] }) {
  const { t } = useI18n();
  return (
    <table className="table diff" data-testid="audit-diff">
      <thead><tr><th>{t('audit.field')}</th><th /><th>{t('audit.before')}</th><th>{t('audit.after')}</th></tr></thead>
      <tbody>{changes.map((c) => (
        <tr key={c.path} className={`diff-${c.kind}`} data-path={c.path}>
          <td className="mono small">{c.path}</td>
          <td><span className={`chip diff-kind-${c.kind}`}>{t(`audit.kind.${c.kind}` as Key)}</span></td>
          <td className="mono small old">{c.before ?? ''}</td>
          <td className="mono small new">{c.after ?? ''}</td>
        </tr>
      ))}</tbody>
    </table>
  );
}
