// Shared pieces: routing, session, data loading with states.
import { createContext, useCallback, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import { Api, ApiError, peekEarly, type WhoAmI } from './api';
import { useI18n } from './i18n';

// ------------------------------------------------------------------ routing

interface Router { path: string; search: URLSearchParams; navigate: (to: string) => void }
export const RouterContext = createContext<Router>({ path: '/', search: new URLSearchParams(), navigate: () => {} });
export const useRouter = () => useContext(RouterContext);

export function Link({ to, children, className }: { to: string; children: ReactNode; className?: string }) {
  const { navigate } = useRouter();
  return (
    <a href={to} className={className} onClick={(e) => {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
      e.preventDefault();
      navigate(to);
    }}>{children}</a>
  );
}

// ------------------------------------------------------------------ session

export interface Session {
  api: Api;
  who: WhoAmI;
  isAdmin: boolean;
  isGroupAdmin: boolean;
  logout: () => void;
}
export const SessionContext = createContext<Session | null>(null);
export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('no session');
  return s;
}

// ------------------------------------------------------------------ loading

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads with `fn` whenever `deps` change, and again every `pollMs` when set
 * (keeping the last data while it reloads). `early`: the path of the request
 * index.html may already have answered; its data is then shown in the very
 * first render, without asking again.
 */
export function useLoad<T>(fn: (api: Api, signal: AbortSignal) => Promise<T>, deps: unknown[], pollMs?: number,
  early?: string): Loaded<T> {
  const { api } = useSession();
  const skipFirst = useRef(false);
  const [data, setData] = useState<T | undefined>(() => {
    const d = early ? peekEarly<T>(early, api.token, api.lang) : undefined;
    skipFirst.current = d !== undefined;
    return d;
  });
  const [error, setError] = useState<ApiError>();
  const [loading, setLoading] = useState(!skipFirst.current);
  const [tick, setTick] = useState(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const reload = useCallback(() => setTick((n) => n + 1), []);

  useEffect(() => {
    if (skipFirst.current) { skipFirst.current = false; return; }
    const ctl = new AbortController();
    setLoading(true);
    fnRef.current(api, ctl.signal).then(
      (d) => { if (!ctl.signal.aborted) { setData(d); setError(undefined); setLoading(false); } },
      (e: unknown) => {
        if (ctl.signal.aborted) return;
        setError(e instanceof ApiError ? e : new ApiError(0, 'client', String((e as Error)?.message ?? e)));
        setLoading(false);
      },
    );
    return () => ctl.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [api, tick, ...deps]);

  useEffect(() => {
    if (!pollMs) return;
    const id = window.setInterval(() => { if (!document.hidden) setTick((n) => n + 1); }, pollMs);
    return () => window.clearInterval(id);
  }, [pollMs]);

  return { data, error, loading, reload };
}

export function Loading() {
  const { t } = useI18n();
  return <div className="state loading" role="status">{t('common.loading')}</div>;
}

export function Empty({ children }: { children?: ReactNode }) {
  const { t } = useI18n();
  return <div className="state empty">{children ?? t('common.empty')}</div>;
}

export function ErrorBox({ error, retry }: { error: ApiError; retry?: () => void }) {
  const { t } = useI18n();
  return (
    <div className="state error" role="alert">
      <strong>{error.status === 403 ? t('common.forbidden') : t('common.error')}</strong>
      <div>{error.message}</div>
      {retry && <button onClick={retry}>{t('common.retry')}</button>}
    </div>
  );
}

/** Renders loading / error / content for a Loaded value. */
export function Show<T>({ l, children }: { l: Loaded<T>; children: (d: T) => ReactNode }) {
  if (l.data !== undefined) return <>{l.error && <ErrorBox error={l.error} retry={l.reload} />}{children(l.data)}</>;
  if (l.error) return <ErrorBox error={l.error} retry={l.reload} />;
  return <Loading />;
}

export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  return (
    <section className="page">
      <header className="page-head"><h1>{title}</h1><div className="actions">{actions}</div></header>
      {children}
    </section>
  );
}

export function Labels({ labels }: { labels: Record<string, string> | undefined }) {
  const entries = Object.entries(labels ?? {});
  if (!entries.length) return <span className="muted">—</span>;
  return <span className="labels">{entries.map(([k, v]) => <span key={k} className="chip">{k}={v}</span>)}</span>;
}

export function Badge({ kind, children }: { kind: string; children: ReactNode }) {
  return <span className={`badge badge-${kind.toLowerCase()}`}>{children}</span>;
}

/** The current time, refreshed every `ms` so relative times move. */
export function useNow(ms = 5000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const id = window.setInterval(() => setNow(Date.now()), ms);
    return () => window.clearInterval(id);
  }, [ms]);
  return now;
}

/** Marks the first time a page shows its data (read by the browser tests' timing). */
export function useReadyMark(name: string, ready: boolean): void {
  useEffect(() => {
    if (!ready || typeof performance === 'undefined' || performance.getEntriesByName(name).length) return;
    // After the next paint: a task queued from requestAnimationFrame runs once that frame is drawn
    // (effects can run before the browser paints, which would flatter the figure).
    const raf = requestAnimationFrame(() => setTimeout(() => {
      if (performance.getEntriesByName(name).length === 0) performance.mark(name);
    }, 0));
    return () => cancelAnimationFrame(raf);
  }, [name, ready]);
}
