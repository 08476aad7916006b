import type { Api, ProjectGroupDoc, UsageRow } from '../api';
import { formatNumber, formatPercent } from '../format';
import { useI18n, type Key } from '../i18n';
import { Badge, Empty, Link, Page, Show, useLoad } from '../ui';

interface Data { groups: ProjectGroupDoc[]; gpuHours: Record<string, number> }

function monthStart(now = new Date()): string {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().slice(0, 10);
}

async function load(api: Api, signal: AbortSignal): Promise<Data> {
  const [groups, usage] = await Promise.all([
    api.get<{ items: ProjectGroupDoc[] }>('/api/v1/project-groups', signal),
    api.get<{ items: UsageRow[] }>(`/api/v1/usage?from=${monthStart()}&group_by=project_group`, signal)
      .catch(() => ({ items: [] as UsageRow[] })),
  ]);
  const gpuHours: Record<string, number> = {};
  for (const r of usage.items) {
    gpuHours[String(r.project_group)] = Number(r.gpu_hours ?? r.gpu_seconds / 3600);
  }
  return { groups: groups.items, gpuHours };
}

export function ProjectGroups() {
  const { t } = useI18n();
  const l = useLoad(load, [], 30000);
  return (
    <Page title={t('pg.title')}>
      <Show l={l}>{(d) => d.groups.length === 0 ? <Empty>{t('pg.empty')}</Empty> : (
        <div className="stack">
          {d.groups.map((g) => {
            const burn = g.status?.budget?.gpu_hours;
            const budget = burn?.budget ?? g.spec.monthly_budget?.gpu_hours ?? 0;
            const used = burn?.used ?? d.gpuHours[g.metadata.name] ?? 0;
            const pct = budget > 0 ? (used / budget) * 100 : 0;
            return (
              <div className="card" key={g.metadata.name} data-testid={`pg-${g.metadata.name}`}>
                <div className="card-head"><h2>{g.metadata.name}</h2>
                  <Link to={`/tasks?project_group=${encodeURIComponent(g.metadata.name)}`}>{t('nav.tasks')} →</Link></div>
                <div className="grid2">
                  <div>
                    <h3>{t('pg.members')}</h3>
                    {g.spec.members.length === 0 ? <Empty /> : (
                      <table className="table"><tbody>
                        {g.spec.members.map((m) => (
                          <tr key={m.user}><td>{m.user}</td>
                            <td><Badge kind={m.role}>{t((m.role === 'admin' ? 'role.pgAdmin' : 'role.user') as Key)}</Badge></td></tr>
                        ))}
                      </tbody></table>
                    )}
                  </div>
                  <div>
                    <dl className="facts">
                      <dt>{t('pg.defaultRg')}</dt><dd>{g.spec.default_resource_group || '—'}</dd>
                      <dt>{t('pg.otherRgs')}</dt>
                      <dd>{g.spec.resource_groups.length === 0 ? '—' : g.spec.resource_groups.map((r) => (
                        <span key={r.name} className="chip">{r.name}{r.approval === 'required' ? ` (${t('pg.approval')})` : ''}</span>
                      ))}</dd>
                    </dl>
                    <h3>{t('pg.budget')}</h3>
                    {budget > 0 ? (
                      <>
                        <div className="qbar-track"><div className={`qbar-fill level-${pct >= 95 ? 3 : pct >= 85 ? 2 : pct >= 70 ? 1 : 0}`}
                          style={{ width: `${Math.min(100, pct)}%` }} /></div>
                        <p className="small">{t('pg.budgetBurn', { used: formatNumber(used, 1), budget, pct: formatPercent(pct, 1) })}</p>
                        {burn && (
                          <p className={`small ${burn.exhausted || burn.runs_out_at ? 'warn' : 'muted'}`} data-testid={`pg-pace-${g.metadata.name}`}>
                            {burn.exhausted ? t('pg.budgetExhausted')
                              : burn.runs_out_at ? t('pg.budgetRunsOut', { day: burn.runs_out_at.slice(0, 10), projected: formatNumber(burn.projected, 0) })
                                : t('pg.budgetPace', { projected: formatNumber(burn.projected, 0) })}
                          </p>
                        )}
                      </>
                    ) : <p className="muted">{t('pg.noBudget')}</p>}
                  </div>
                </div>
              </div>
            );
          })}
        </div>
      )}</Show>
    </Page>
  );
}
