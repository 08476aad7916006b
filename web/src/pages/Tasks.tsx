import { useState } from 'react';
import { qs, type Task } from '../api';
import { formatDuration, formatReason, formatTime } from '../format';
import { stateLabel, useI18n } from '../i18n';
import { Badge, Empty, Link, Page, Show, useLoad, useNow, useReadyMark, useRouter } from '../ui';

export const TASK_STATES = ['Queued', 'Admitted', 'Dispatched', 'Running', 'Preempting', 'Lost', 'Succeeded', 'Failed', 'Cancelled'];
const FILTERS = ['project_group', 'resource_group', 'cluster', 'pipeline'] as const;
const PAGE = 50;

export function TaskState({ state }: { state: string }) {
  const { lang } = useI18n();
  return <Badge kind={state}>{stateLabel(lang, state)}</Badge>;
}

/** Seconds it waited (still queued) or ran (running or ended). */
export function taskTime(task: Task, now: number): number {
  if (task.started_at) return ((task.finished_at || now) - task.started_at) / 1000;
  return ((task.finished_at || now) - (task.queued_at || task.created_at)) / 1000;
}

/** The first page's query for the filters in a URL's search part (also used to prefetch it). */
export function tasksQuery(search: URLSearchParams, cursor = ''): string {
  const filters: Record<string, string> = {};
  for (const k of ['state', ...FILTERS]) filters[k] = search.get(k) ?? '';
  return `/api/v1/tasks${qs({ ...filters, limit: PAGE, cursor })}`;
}

export function Tasks() {
  const { t, lang } = useI18n();
  const { search, navigate } = useRouter();
  const now = useNow(3000);
  const filters: Record<string, string> = {};
  for (const k of ['state', ...FILTERS]) filters[k] = search.get(k) ?? '';
  const [cursors, setCursors] = useState<string[]>([]); // cursors of the pages before this one
  const [cursor, setCursor] = useState('');
  const key = JSON.stringify(filters);
  const l = useLoad((api, s) => api.get<{ items: Task[]; next_cursor?: string }>(tasksQuery(search, cursor), s),
    [key, cursor], 3000, tasksQuery(search));
  useReadyMark('cp:tasks-ready', !!l.data);

  function setFilter(k: string, v: string) {
    const p = new URLSearchParams(search);
    if (v) p.set(k, v); else p.delete(k);
    setCursor('');
    setCursors([]);
    const s = p.toString();
    navigate(`/tasks${s ? `?${s}` : ''}`);
  }

  return (
    <Page title={t('tasks.title')} actions={<span className="muted small">{t('tasks.live')}</span>}>
      <div className="filters card">
        <label>{t('tasks.filterState')}
          <select value={filters.state} onChange={(e) => setFilter('state', e.target.value)} data-testid="filter-state">
            <option value="">{t('common.all')}</option>
            {TASK_STATES.map((s) => <option key={s} value={s}>{stateLabel(lang, s)}</option>)}
          </select>
        </label>
        {FILTERS.map((f) => (
          <FilterInput key={f + (filters[f] ?? '')} label={t(f === 'project_group' ? 'tasks.projectGroup'
            : f === 'resource_group' ? 'tasks.resourceGroup' : f === 'cluster' ? 'tasks.cluster' : 'tasks.pipeline')}
          value={filters[f] ?? ''} onCommit={(v) => setFilter(f, v)} />
        ))}
      </div>
      <div className="card">
        <Show l={l}>{(d) => d.items.length === 0 ? <Empty>{t('tasks.empty')}</Empty> : (
          <>
            <table className="table" data-testid="task-list">
              <thead><tr>
                <th>{t('tasks.id')}</th><th>{t('common.state')}</th><th>{t('tasks.projectGroup')}</th>
                <th>{t('tasks.resourceGroup')}</th><th>{t('tasks.cluster')}</th><th>{t('tasks.waited')}</th>
                <th>{t('tasks.created')}</th>
              </tr></thead>
              <tbody>
                {d.items.map((task) => (
                  <tr key={task.id}>
                    <td><Link to={`/tasks/${encodeURIComponent(task.id)}`}>{task.name}</Link>
                      <div className="muted small mono">{task.id}</div></td>
                    <td><TaskState state={task.state} />
                      {task.state === 'Queued' && task.reasons?.[0] &&
                        <div className="small reason">{formatReason(task.reasons[0], lang)}</div>}</td>
                    <td>{task.project_group}</td>
                    <td>{task.resource_group}</td>
                    <td>{task.assigned_cluster || '—'}</td>
                    <td>{formatDuration(taskTime(task, now), lang)}</td>
                    <td>{formatTime(task.created_at, lang)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <div className="row">
              {cursors.length > 0 && <button onClick={() => {
                const prev = cursors.slice(0, -1);
                setCursor(cursors[cursors.length - 1] ?? '');
                setCursors(prev);
              }}>←</button>}
              {d.next_cursor && <button onClick={() => { setCursors([...cursors, cursor]); setCursor(d.next_cursor!); }}>
                {t('common.next')} →</button>}
            </div>
          </>
        )}</Show>
      </div>
    </Page>
  );
}

function FilterInput({ label, value, onCommit }: { label: string; value: string; onCommit: (v: string) => void }) {
  const [v, setV] = useState(value);
  return (
    <label>{label}
      <input value={v} onChange={(e) => setV(e.target.value)} onBlur={() => v !== value && onCommit(v.trim())}
        onKeyDown={(e) => { if (e.key === 'Enter') onCommit(v.trim()); }} />
    </label>
  );
}
