import { useEffect, useState } from 'react';
import { ApiError, type Api, type PriceEntry, type PriceTable } from '../api';
import { formatTime, resourceLabel } from '../format';
import { useI18n, type Key } from '../i18n';
import { Empty, ErrorBox, Page, Show, useLoad, useSession } from '../ui';

// The shape of examples/prices.yaml, offered when no price is set yet.
const EXAMPLE_PRICES: PriceEntry[] = [
  { resource: 'gpu/nvidia-a100-80gb', per_hour: '2.50', from: '2026-01-01' },
  { resource: 'gpu/nvidia-l40s', per_hour: '1.20', from: '2026-01-01' },
  { resource: 'gpu', per_hour: '1.00', from: '2026-01-01' },
  { resource: 'cpu', per_hour: '0.04', from: '2026-01-01' },
  { resource: 'memory', per_hour: '0.005', from: '2026-01-01' },
];

/** The price table as the YAML the PUT takes. */
export function priceTableYaml(currency: string, prices: PriceEntry[]): string {
  const q = (s: string) => JSON.stringify(s);
  return `apiVersion: cubeplane/v1
kind: PriceTable
metadata: {name: default}
spec:
  currency: ${currency || 'USD'}
  prices:
${prices.map((p) => `    - {resource: ${p.resource}, per_hour: ${q(p.per_hour)}, from: ${p.from}}`).join('\n')}
`;
}

function unitKey(resource: string): Key | null {
  if (resource === 'cpu') return 'prices.unit.cpu';
  if (resource === 'memory') return 'prices.unit.memory';
  if (resource === 'gpu' || resource.startsWith('gpu/')) return 'prices.unit.gpu';
  return null;
}

export function Prices() {
  const { t, lang } = useI18n();
  const { isAdmin } = useSession();
  const l = useLoad((a: Api, signal) => a.get<PriceTable>('/api/v1/price-table', signal), []);
  return (
    <Page title={t('prices.title')}>
      <Show l={l}>{(d) => (
        <>
          <div className="card">
            <div className="card-head">
              <span className="muted">{t('prices.currency', { currency: d.spec.currency || '—' })}</span>
              {d.metadata.updated_at > 0 && <span className="muted small">{t('prices.updated', { time: formatTime(d.metadata.updated_at, lang) })}</span>}
            </div>
            {d.spec.prices.length === 0 ? <Empty>{t('prices.empty')}</Empty> : (
              <table className="table" data-testid="price-table">
                <thead><tr>
                  <th>{t('prices.resource')}</th><th className="num">{t('prices.perHour')}</th>
                  <th>{t('prices.unit')}</th><th>{t('prices.from')}</th>
                </tr></thead>
                <tbody>{d.spec.prices.map((p, i) => {
                  const unit = unitKey(p.resource);
                  return (
                    <tr key={i} data-resource={p.resource}>
                      <td>{p.resource === 'gpu' ? `GPU (${t('prices.anyGpu')})` : resourceLabel(p.resource, lang)}
                        {' '}<span className="muted mono small">{p.resource}</span></td>
                      <td className="num">{p.per_hour} {d.spec.currency}</td>
                      <td>{unit ? t(unit) : '—'}</td>
                      <td>{p.from}</td>
                    </tr>
                  );
                })}</tbody>
              </table>
            )}
          </div>
          {isAdmin && <PriceEditor table={d} onSaved={l.reload} />}
        </>
      )}</Show>
    </Page>
  );
}

function PriceEditor({ table, onSaved }: { table: PriceTable; onSaved: () => void }) {
  const { t } = useI18n();
  const { api } = useSession();
  const initial = () => priceTableYaml(table.spec.currency, table.spec.prices.length ? table.spec.prices : EXAMPLE_PRICES);
  const [text, setText] = useState(initial);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ ok: true } | { ok: false; error: ApiError } | null>(null);
  // A new table from the server (after a save) refreshes the text unless it is being edited.
  const [base, setBase] = useState(table.metadata.updated_at);
  useEffect(() => {
    if (table.metadata.updated_at !== base) { setBase(table.metadata.updated_at); setText(initial()); }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [table.metadata.updated_at]);

  async function save() {
    setBusy(true);
    setOutcome(null);
    try {
      await api.putYaml<PriceTable>('/api/v1/price-table', text);
      setOutcome({ ok: true });
      onSaved();
    } catch (e) {
      if (e instanceof ApiError) setOutcome({ ok: false, error: e });
      else throw e;
    } finally {
      setBusy(false);
    }
  }

  const field = outcome && !outcome.ok && typeof outcome.error.details.field === 'string' ? outcome.error.details.field : '';
  return (
    <div className="card" data-testid="price-editor">
      <h2>{t('prices.edit')}</h2>
      <p className="muted small">{t('prices.editHint')}</p>
      <textarea className="mono wide" data-testid="price-yaml" spellCheck={false} value={text}
        rows={Math.max(10, text.split('\n').length + 1)}
        onChange={(e) => { setText(e.target.value); setOutcome(null); }} />
      <div className="row">
        <button className="primary" data-testid="price-save" onClick={save} disabled={busy}>
          {busy ? t('prices.saving') : t('prices.save')}</button>
        <button onClick={() => { setText(initial()); setOutcome(null); }} disabled={busy}>{t('prices.reset')}</button>
      </div>
      <div data-testid="price-result">
        {outcome?.ok && <div className="state ok">{t('prices.saved')}</div>}
        {outcome && !outcome.ok && (outcome.error.status === 400 ? (
          <div className="state error" role="alert" data-code={outcome.error.code}>
            <strong>{t('prices.rejected')}</strong>
            <div>{outcome.error.message}</div>
            {field && <div className="small">{t('submit.field')}: <code>{field}</code></div>}
          </div>
        ) : <ErrorBox error={outcome.error} />)}
      </div>
    </div>
  );
}
