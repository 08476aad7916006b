import { useEffect, useRef, useState } from 'react';
import { ApiError, type Attempt, type Explain, type Task } from '../api';
import { attemptMessage, formatDuration, formatReason, formatResource, formatTime, resourceLabel } from '../format';
import { stateLabel, useI18n } from '../i18n';
import { ErrorBox, Link, Loading, Page, useLoad, useNow, useSession } from '../ui';
import { TaskState } from './Tasks';

const TERMINAL = ['Succeeded', 'Failed', 'Cancelled'];

export function TaskPage({ id }: { id: string }) {
  const { t, lang } = useI18n();
  const { api } = useSession();
  const enc = encodeURIComponent(id);
  const task = useLoad((a, s) => a.get<Task & { attempts: Attempt[] }>(`/api/v1/tasks/${enc}`, s), [id], 2000);
  const explain = useLoad((a, s) => a.get<Explain>(`/api/v1/tasks/${enc}/explain`, s), [id], 3000);
  const [cancelError, setCancelError] = useState<ApiError>();

  if (!task.data) {
    return <Page title={t('task.title', { name: id })}>
      {task.error ? <ErrorBox error={task.error} retry={task.reload} /> : <Loading />}</Page>;
  }
  const tk = task.data;
  const attempts = Array.isArray(tk.attempts) ? tk.attempts : [];
  const done = TERMINAL.includes(tk.state);
  const reasons = explain.data?.reasons ?? tk.reasons ?? [];
  const summary = explain.data ? (lang === 'zh-CN' && explain.data.summary_zh ? explain.data.summary_zh : explain.data.summary) : '';

  return (
    <Page title={t('task.title', { name: tk.name })} actions={<>
      <Link to="/tasks">← {t('task.back')}</Link>
      {!done && <button onClick={async () => {
        try { await api.json('POST', `/api/v1/tasks/${enc}/cancel`); task.reload(); } catch (e) {
          if (e instanceof ApiError) setCancelError(e);
        }
      }}>{t('task.cancel')}</button>}
    </>}>
      {cancelError && <ErrorBox error={cancelError} />}
      <div className="card">
        <div className="card-head">
          <div><span className="mono small muted">{tk.id}</span></div>
          <span data-testid="task-state"><TaskState state={tk.state} /></span>
        </div>
        <dl className="facts">
          <dt>{t('tasks.projectGroup')}</dt><dd>{tk.project_group}</dd>
          <dt>{t('tasks.resourceGroup')}</dt><dd>{tk.resource_group}</dd>
          <dt>{t('tasks.pipeline')}</dt><dd><Link to={`/tasks?pipeline=${encodeURIComponent(tk.pipeline_id)}`}>{tk.pipeline_id}</Link></dd>
          <dt>{t('tasks.user')}</dt><dd>{tk.user}</dd>
          <dt>{t('task.resources')}</dt>
          <dd>{Object.entries(tk.step?.resources ?? {}).map(([k, v]) => (
            <span key={k} className="chip">{resourceLabel(k, lang)}: {formatResource(k, v, lang)}</span>))}
          {tk.step?.replicas > 1 ? <span className="chip">× {tk.step.replicas}</span> : null}</dd>
          <dt>{t('task.command')}</dt><dd className="mono small">{(tk.step?.command ?? []).join(' ')}</dd>
          <dt>{t('tasks.created')}</dt><dd>{formatTime(tk.created_at, lang)}</dd>
        </dl>
      </div>
      <div className="card" data-testid="explain">
        <h2>{t('task.explain')}</h2>
        {summary && <p className="summary">{summary}</p>}
        {reasons.length === 0 ? <p className="muted">{t('task.noReasons')}</p> : (
          <ul className="reasons">{reasons.map((r, i) => <li key={i} data-code={r.code}>{formatReason(r, lang)}</li>)}</ul>
        )}
      </div>
      <div className="card">
        <h2>{t('task.attempts')}</h2>
        <Timeline task={tk} attempts={attempts} />
      </div>
      <div className="card">
        <h2>{t('task.logs')}</h2>
        <Logs taskId={id} attempts={attempts} taskDone={done} />
      </div>
    </Page>
  );
}

function Timeline({ task, attempts }: { task: Task; attempts: Attempt[] }) {
  const { t, lang } = useI18n();
  const now = useNow(2000);
  if (!attempts.length) return <p className="muted">{t('task.noAttempts')}</p>;
  const start = task.created_at;
  const end = Math.max(now, ...attempts.map((a) => a.finished_at || now));
  const span = Math.max(1, end - start);
  const pos = (v: number) => `${((v - start) / span) * 100}%`;
  return (
    <div className="timeline" data-testid="timeline">
      {attempts.map((a) => {
        const from = a.started_at || a.created_at;
        const to = a.finished_at || now;
        const nodes = a.placements.map((p) => `${a.cluster_id}/${p.node}${p.gpu_indices.length ? ` [GPU ${p.gpu_indices.join(',')}]` : ''}`);
        const message = attemptMessage(a, lang);
        return (
          <div key={a.id} className="tl-row" data-testid={`attempt-${a.number}`} data-state={a.state}>
            <div className="tl-label">{t('task.attempt', { n: a.number })}</div>
            <div className="tl-track">
              <div className={`tl-bar badge-${a.state.toLowerCase()}`}
                style={{ left: pos(from), width: `max(4px, calc(${pos(to)} - ${pos(from)}))` }}
                title={`${formatTime(from, lang)} → ${a.finished_at ? formatTime(a.finished_at, lang) : '…'}`} />
            </div>
            <div className="tl-info small">
              {stateLabel(lang, a.state)} · {formatDuration((to - from) / 1000, lang)} · {nodes.join(', ') || '—'}
              {a.finished_at ? ` · ${t('task.exitCode')} ${a.exit_code}` : ''}
              {a.stop_reason ? ` · ${t('task.stopReason')}: ${a.stop_reason}` : ''}
              {message ? ` · ${message}` : ''}
            </div>
          </div>
        );
      })}
    </div>
  );
}

/** Follows the log of the chosen attempt (the latest by default) with a streamed fetch. */
function Logs({ taskId, attempts, taskDone }: { taskId: string; attempts: Attempt[]; taskDone: boolean }) {
  const { t } = useI18n();
  const { api } = useSession();
  const [chosen, setChosen] = useState<number | null>(null);
  const latest = attempts.length ? Math.max(...attempts.map((a) => a.number)) : 0;
  const n = chosen ?? latest;
  const attempt = attempts.find((a) => a.number === n);
  const attemptDone = !!attempt?.finished_at;
  const [text, setText] = useState('');
  const [status, setStatus] = useState<'idle' | 'following' | 'ended' | 'error'>('idle');
  const [error, setError] = useState<ApiError>();
  const [round, setRound] = useState(0);
  const box = useRef<HTMLPreElement>(null);

  useEffect(() => {
    if (!n) return;
    const ctl = new AbortController();
    let buf = '';
    setText('');
    setError(undefined);
    setStatus('following');
    const path = `/api/v1/tasks/${encodeURIComponent(taskId)}/logs?attempt=${n}&follow=true`;
    api.stream(path, (chunk) => { buf += chunk; setText(buf); }, ctl.signal).then(
      () => setStatus('ended'),
      (e: unknown) => {
        if (ctl.signal.aborted) return;
        if (e instanceof ApiError) setError(e);
        setStatus('error');
      },
    );
    return () => ctl.abort();
  }, [api, taskId, n, round]);

  // A stream that closed (or failed) while the attempt still runs is opened again.
  useEffect(() => {
    if ((status === 'ended' || status === 'error') && n && !attemptDone && !taskDone) {
      const id = window.setTimeout(() => setRound((r) => r + 1), 2000);
      return () => window.clearTimeout(id);
    }
    return undefined;
  }, [status, n, attemptDone, taskDone]);

  useEffect(() => {
    const el = box.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [text]);

  if (!latest) return <p className="muted">{t('task.noLogs')}</p>;
  return (
    <div>
      {attempts.length > 1 && (
        <div className="segmented">
          {attempts.map((a) => (
            <button key={a.number} className={a.number === n ? 'on' : ''} onClick={() => setChosen(a.number)}>
              {t('task.attempt', { n: a.number })}
            </button>
          ))}
        </div>
      )}
      <pre className="logs" ref={box} data-testid="logs">{text || (status === 'following' ? '' : t('task.noLogs'))}</pre>
      <div className="muted small" data-testid="logs-status">
        {status === 'following' ? t('task.following') : status === 'ended' ? t('task.logsEnded') : ''}
      </div>
      {status === 'error' && error && <ErrorBox error={error} />}
    </div>
  );
}
