import { useMemo, useState } from 'react';
import { ApiError, qs, type Api, type Approval, type List, type ProjectGroupDoc } from '../api';
import { formatTime } from '../format';
import { useI18n, type Key } from '../i18n';
import { Badge, Empty, ErrorBox, Page, Show, useLoad, useRouter, useSession, type Session } from '../ui';

const EXPIRY_DAYS = [0, 7, 30, 90] as const;

type Tab = 'pending' | 'decided';

/** Project group x resource group pairs needing approval that this user may request. */
export function requestablePairs(groups: ProjectGroupDoc[], who: Session['who'], isAdmin: boolean): { pg: string; rg: string }[] {
  const out: { pg: string; rg: string }[] = [];
  for (const g of groups) {
    const role = who.project_groups?.[g.metadata.name];
    if (!isAdmin && role !== 'admin' && role !== 'member') continue;
    for (const r of g.spec.resource_groups ?? []) if (r.approval === 'required') out.push({ pg: g.metadata.name, rg: r.name });
  }
  return out;
}

export function Approvals() {
  const { t } = useI18n();
  const { search } = useRouter();
  const [tab, setTab] = useState<Tab>('pending');
  const [cursors, setCursors] = useState<string[]>(['']);
  const cursor = cursors[cursors.length - 1] ?? '';
  const l = useLoad((a: Api, signal) => a.get<List<Approval>>(`/api/v1/approvals${qs({
    state: tab === 'pending' ? 'pending' : '', limit: 100, cursor,
  })}`, signal), [tab, cursor], 15000);
  const unavailable = l.error?.status === 404;

  return (
    <Page title={t('approvals.title')}>
      {unavailable ? <div className="card"><Empty>{t('approvals.unavailable')}</Empty></div> : (
        <>
          <RequestForm initialPg={search.get('project_group') ?? ''} initialRg={search.get('resource_group') ?? ''}
            onSent={l.reload} />
          <div className="segmented" role="tablist">
            {(['pending', 'decided'] as const).map((k) => (
              <button key={k} role="tab" data-tab={k} className={tab === k ? 'on' : ''}
                onClick={() => { setTab(k); setCursors(['']); }}>{t(`approvals.${k}` as Key)}</button>
            ))}
          </div>
          <Show l={l}>{(d) => {
            const items = tab === 'pending' ? d.items.filter((a) => a.state === 'pending') : d.items.filter((a) => a.state !== 'pending');
            return (
              <div className="card">
                {items.length === 0 ? <Empty>{t('approvals.empty')}</Empty> : <ApprovalTable items={items} onChanged={l.reload} />}
                {(cursors.length > 1 || d.next_cursor) && (
                  <div className="row">
                    <button onClick={() => setCursors([''])} disabled={cursors.length <= 1}>{t('common.first')}</button>
                    <button disabled={!d.next_cursor} onClick={() => d.next_cursor && setCursors((c) => [...c, d.next_cursor!])}>{t('common.next')}</button>
                  </div>
                )}
              </div>
            );
          }}</Show>
        </>
      )}
    </Page>
  );
}

function RequestForm({ initialPg, initialRg, onSent }: { initialPg: string; initialRg: string; onSent: () => void }) {
  const { t } = useI18n();
  const { api, who, isAdmin } = useSession();
  const groups = useLoad((a: Api, signal) => a.get<List<ProjectGroupDoc>>('/api/v1/project-groups', signal), []);
  const pairs = useMemo(() => requestablePairs(groups.data?.items ?? [], who, isAdmin), [groups.data, who, isAdmin]);
  const [pg, setPg] = useState(initialPg);
  const [rg, setRg] = useState(initialRg);
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ ok: true } | { ok: false; error: ApiError } | null>(null);

  const pgs = [...new Set(pairs.map((p) => p.pg))];
  const selPg = pgs.includes(pg) ? pg : pgs[0] ?? '';
  const rgs = pairs.filter((p) => p.pg === selPg).map((p) => p.rg);
  const selRg = rgs.includes(rg) ? rg : rgs[0] ?? '';

  async function send() {
    setBusy(true);
    setOutcome(null);
    try {
      await api.json<Approval>('POST', '/api/v1/approvals', { project_group: selPg, resource_group: selRg, reason });
      setOutcome({ ok: true });
      setReason('');
      onSent();
    } catch (e) {
      if (e instanceof ApiError) setOutcome({ ok: false, error: e });
      else throw e;
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="card" data-testid="approval-request">
      <h2>{t('approvals.request')}</h2>
      <p className="muted small">{t('approvals.requestHint')}</p>
      {groups.error ? <ErrorBox error={groups.error} retry={groups.reload} /> : !groups.data ? <div className="muted">{t('common.loading')}</div>
        : pairs.length === 0 ? <div className="muted">{t('approvals.noneNeeded')}</div> : (
          <div className="form-grid">
            <label>{t('approvals.projectGroup')}
              <select data-testid="approval-pg" value={selPg} onChange={(e) => { setPg(e.target.value); setOutcome(null); }}>
                {pgs.map((p) => <option key={p} value={p}>{p}</option>)}
              </select>
            </label>
            <label>{t('approvals.resourceGroup')}
              <select data-testid="approval-rg" value={selRg} onChange={(e) => { setRg(e.target.value); setOutcome(null); }}>
                {rgs.map((r) => <option key={r} value={r}>{r}</option>)}
              </select>
            </label>
            <label className="grow">{t('approvals.reason')}
              <input data-testid="approval-reason" value={reason} onChange={(e) => setReason(e.target.value)} />
            </label>
            <button className="primary" data-testid="approval-send" onClick={send} disabled={busy || !selPg || !selRg}>{t('approvals.send')}</button>
          </div>
        )}
      <div data-testid="approval-request-result">
        {outcome?.ok && <div className="state ok">{t('approvals.sent')}</div>}
        {outcome && !outcome.ok && <div className="state error" role="alert" data-code={outcome.error.code}>{outcome.error.message}</div>}
      </div>
    </div>
  );
}

function ApprovalTable({ items, onChanged }: { items: Approval[]; onChanged: () => void }) {
  const { t, lang } = useI18n();
  return (
    <table className="table" data-testid="approval-list">
      <thead><tr>
        <th>{t('approvals.projectGroup')}</th><th>{t('approvals.resourceGroup')}</th>
        <th>{t('approvals.requestedBy')}</th><th>{t('approvals.reason')}</th><th>{t('common.state')}</th>
        <th>{t('approvals.decidedBy')}</th><th>{t('approvals.expires')}</th><th>{t('approvals.created')}</th>
        <th>{t('common.actions')}</th>
      </tr></thead>
      <tbody>{items.map((a) => (
        <tr key={a.id} data-approval={a.id} data-pg={a.project_group} data-rg={a.resource_group} data-state={a.state}>
          <td>{a.project_group}</td>
          <td>{a.resource_group}</td>
          <td>{a.requested_by}</td>
          <td>{a.reason || '—'}</td>
          <td>
            <Badge kind={a.state}>{t(`approvals.state.${a.state}` as Key)}</Badge>
            {a.state === 'approved' && <span className="muted small"> {a.active ? t('approvals.active') : t('approvals.expired')}</span>}
          </td>
          <td>{a.decided_by || '—'}{a.note && <div className="muted small">{a.note}</div>}</td>
          <td>{a.state === 'approved' ? (a.expires_at ? formatTime(a.expires_at, lang) : t('approvals.never')) : '—'}</td>
          <td className="nowrap">{formatTime(a.created_at, lang)}</td>
          <td><Decide a={a} onChanged={onChanged} /></td>
        </tr>
      ))}</tbody>
    </table>
  );
}

function Decide({ a, onChanged }: { a: Approval; onChanged: () => void }) {
  const { t } = useI18n();
  const { api, who, isAdmin } = useSession();
  const [days, setDays] = useState<number>(30);
  const [note, setNote] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError>();
  const allowed = isAdmin || who.project_groups?.[a.project_group] === 'admin';
  if (!allowed || !(a.state === 'pending' || (a.state === 'approved' && a.active))) return <span className="muted">—</span>;

  async function act(action: 'approve' | 'deny' | 'revoke') {
    setBusy(true);
    setError(undefined);
    try {
      const body: Record<string, unknown> = { note };
      if (action === 'approve' && days > 0) body.ttl_s = days * 86400;
      await api.json<Approval>('POST', `/api/v1/approvals/${encodeURIComponent(a.id)}/${action}`, body);
      onChanged();
    } catch (e) {
      if (e instanceof ApiError) setError(e);
      else throw e;
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="decide">
      {a.state === 'pending' && (
        <label className="small muted">{t('approvals.expiry')}{' '}
          <select data-testid="approval-expiry" value={days} onChange={(e) => setDays(Number(e.target.value))}>
            {EXPIRY_DAYS.map((n) => <option key={n} value={n}>{n === 0 ? t('approvals.expiry.none') : t('approvals.expiry.days', { n })}</option>)}
          </select>
        </label>
      )}
      <input data-testid="approval-note" placeholder={t('approvals.notePlaceholder')} value={note} onChange={(e) => setNote(e.target.value)} />
      {a.state === 'pending' && <>
        <button className="primary" data-testid="approve" disabled={busy} onClick={() => act('approve')}>{t('approvals.approve')}</button>
        <button data-testid="deny" disabled={busy} onClick={() => act('deny')}>{t('approvals.deny')}</button>
      </>}
      {a.state === 'approved' && <button data-testid="revoke" disabled={busy} onClick={() => act('revoke')}>{t('approvals.revoke')}</button>}
      {error && <div className="state error small" role="alert">{error.message}</div>}
    </div>
  );
}
