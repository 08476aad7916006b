import { useMemo, useRef, useState } from 'react';
import { parse, parseAllDocuments } from 'yaml';
import { ApiError, qs } from '../api';
import { useI18n } from '../i18n';
import { Link, Page, useRouter, useSession } from '../ui';

const EXAMPLE = `apiVersion: cubeplane/v1
kind: Pipeline
metadata:
  name: hello
  project_group: proj-c
spec:
  steps:
    - name: prepare
      command: ["/bin/sh", "-c", "echo preparing; sleep 1; echo prepared"]
      resources: {cpu: "1", memory: 512Mi}
    - name: train
      depends_on: [prepare]
      command: ["/bin/sh", "-c", "for i in 1 2 3; do echo epoch $i; sleep 0.5; done"]
      resources: {cpu: "2", memory: 1Gi}
`;

/**
 * The project group and resource group an approval_required refusal is about: from the error's
 * details when the server names them, else from the pipeline's metadata.project_group and
 * spec.resource_group (or the single resource group its steps name).
 */
export function approvalPair(details: Record<string, unknown>, text: string): { pg: string; rg: string } {
  const s = (v: unknown) => (typeof v === 'string' ? v : '');
  let pg = s(details.project_group);
  let rg = s(details.resource_group);
  if (!pg || !rg) {
    try {
      const doc = parse(text) as { metadata?: { project_group?: unknown }; spec?: { resource_group?: unknown; steps?: { resource_group?: unknown }[] } } | null;
      pg ||= s(doc?.metadata?.project_group);
      const stepRgs = [...new Set((doc?.spec?.steps ?? []).map((x) => s(x?.resource_group)).filter(Boolean))];
      rg ||= s(doc?.spec?.resource_group) || (stepRgs.length === 1 ? stepRgs[0]! : '');
    } catch {
      /* not parseable: leave the pair open */
    }
  }
  return { pg, rg };
}

export interface YamlProblem { line: number; message: string }

/** Syntax problems of a YAML text, with 1-based line numbers. */
export function yamlProblems(text: string): YamlProblem[] {
  const out: YamlProblem[] = [];
  for (const doc of parseAllDocuments(text)) {
    for (const e of doc.errors) {
      out.push({ line: e.linePos?.[0]?.line ?? 1, message: e.message.split('\n')[0] ?? e.message });
    }
  }
  return out;
}

interface Created { pipeline: { id: string; name: string }; tasks: { id: string; name: string; state: string }[] }

type Outcome =
  | { kind: 'ok'; text: string }
  | { kind: 'server'; error: ApiError }
  | { kind: 'created'; created: Created };

export function Submit() {
  const { t } = useI18n();
  const { api } = useSession();
  const { navigate } = useRouter();
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const gutter = useRef<HTMLDivElement>(null);

  const problems = useMemo(() => (text.trim() ? yamlProblems(text) : []), [text]);
  const bad = new Set(problems.map((p) => p.line));
  const serverLine = outcome?.kind === 'server' && typeof outcome.error.details.line === 'number'
    ? outcome.error.details.line : null;
  const lines = text.split('\n').length;

  async function send(validateOnly: boolean) {
    if (!text.trim()) { setOutcome({ kind: 'ok', text: t('submit.empty') }); return; }
    if (problems.length) return;
    setBusy(true);
    setOutcome(null);
    try {
      if (validateOnly) {
        // dry_run: the server checks everything a submit would (names, references, quotas) and creates nothing.
        const r = await api.postYaml<Created>('/api/v1/pipelines?dry_run=true', text);
        setOutcome({ kind: 'ok', text: t('submit.serverOk', { n: r.body.tasks?.length ?? 0 }) });
      } else {
        const r = await api.postYaml<Created>('/api/v1/pipelines', text);
        setOutcome({ kind: 'created', created: r.body });
      }
    } catch (e) {
      if (e instanceof ApiError) setOutcome({ kind: 'server', error: e });
      else throw e;
    } finally {
      setBusy(false);
    }
  }

  return (
    <Page title={t('submit.title')} actions={
      <button onClick={() => { setText(EXAMPLE); setOutcome(null); }}>{t('submit.example')}</button>}>
      <div className="card">
        <div className="editor">
          <div className="gutter" ref={gutter} aria-hidden>
            {Array.from({ length: lines }, (_, i) => (
              <div key={i} className={bad.has(i + 1) || serverLine === i + 1 ? 'bad' : ''}>{i + 1}</div>
            ))}
          </div>
          <textarea data-testid="yaml-editor" spellCheck={false} value={text} rows={Math.max(18, lines + 1)}
            onChange={(e) => { setText(e.target.value); setOutcome(null); }}
            onScroll={(e) => { if (gutter.current) gutter.current.scrollTop = e.currentTarget.scrollTop; }}
            placeholder="apiVersion: cubeplane/v1&#10;kind: Pipeline&#10;…" />
        </div>
        <div className="problems" data-testid="yaml-problems">
          {problems.map((p, i) => (
            <div key={i} className="state error small">{t('submit.yamlError', { line: p.line, message: p.message })}</div>
          ))}
        </div>
        <div className="row">
          <button data-testid="validate" onClick={() => send(true)} disabled={busy || problems.length > 0}>{t('submit.validate')}</button>
          <button className="primary" data-testid="submit" onClick={() => send(false)} disabled={busy || problems.length > 0}>
            {busy ? t('submit.submitting') : t('submit.submit')}
          </button>
        </div>
        <div data-testid="submit-result">
          {outcome?.kind === 'ok' && <div className="state ok">{outcome.text}</div>}
          {outcome?.kind === 'server' && (
            <div className="state error" role="alert" data-code={outcome.error.code}>
              <strong>{t('submit.rejected')}</strong>
              <div>{outcome.error.message}</div>
              {outcome.error.code === 'approval_required' && (() => {
                const p = approvalPair(outcome.error.details, text);
                return (
                  <div className="row" data-testid="approval-needed">
                    {p.pg && p.rg && <span>{t('submit.needsApproval', { pg: p.pg, rg: p.rg })}</span>}
                    <button className="primary" data-testid="request-approval"
                      onClick={() => navigate(`/approvals${qs({ project_group: p.pg, resource_group: p.rg })}`)}>{t('submit.requestApproval')}</button>
                  </div>
                );
              })()}
              {Object.entries(outcome.error.details).filter(([, v]) => typeof v !== 'object').map(([k, v]) => (
                <div key={k} className="small">{k === 'field' ? t('submit.field') : k}: <code>{String(v)}</code></div>
              ))}
            </div>
          )}
          {outcome?.kind === 'created' && (
            <div className="state ok">
              {t('submit.created', { name: outcome.created.pipeline.name, n: outcome.created.tasks.length })}
              <ul>{outcome.created.tasks.map((x) => (
                <li key={x.id}><Link to={`/tasks/${encodeURIComponent(x.id)}`}>{x.name}</Link> <span className="muted mono small">{x.id}</span></li>
              ))}</ul>
            </div>
          )}
        </div>
      </div>
    </Page>
  );
}
