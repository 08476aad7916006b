import { lazy, Suspense, useCallback, useEffect, useMemo, useState, type ReactNode } from 'react';
import { Api, cachedWho, savedToken, saveToken, type WhoAmI } from './api';
import type { Lang } from './format';
import { defaultLang, I18nContext, translate, useI18n, type I18n, type Key } from './i18n';
import { Link, Loading, RouterContext, SessionContext, useRouter, useSession, type Session } from './ui';
import { Login } from './pages/Login';
// The landing pages (small, no charting library) are in the main chunk; the rest load on demand.
import { Alerts } from './pages/Alerts';
import { Overview } from './pages/Overview';
import { Tasks } from './pages/Tasks';
const Clusters = lazy(() => import('./pages/Clusters').then((m) => ({ default: m.Clusters })));
const ResourceGroups = lazy(() => import('./pages/ResourceGroups').then((m) => ({ default: m.ResourceGroups })));
const ProjectGroups = lazy(() => import('./pages/ProjectGroups').then((m) => ({ default: m.ProjectGroups })));
const TaskPage = lazy(() => import('./pages/TaskPage').then((m) => ({ default: m.TaskPage })));
const Submit = lazy(() => import('./pages/Submit').then((m) => ({ default: m.Submit })));
const Usage = lazy(() => import('./pages/Usage').then((m) => ({ default: m.Usage })));
const Prices = lazy(() => import('./pages/Prices').then((m) => ({ default: m.Prices })));
const Audit = lazy(() => import('./pages/Audit').then((m) => ({ default: m.Audit })));
const Approvals = lazy(() => import('./pages/Approvals').then((m) => ({ default: m.Approvals })));
const Users = lazy(() => import('./pages/Users').then((m) => ({ default: m.Users })));

interface Route {
  path: string;
  label: Key;
  adminOnly?: boolean;
  /** Shown only when this holds (in addition to adminOnly). */
  when?: (who: WhoAmI, isAdmin: boolean) => boolean;
  render: () => ReactNode;
}

const ROUTES: Route[] = [
  { path: '/', label: 'nav.overview', render: () => <Overview /> },
  { path: '/clusters', label: 'nav.clusters', render: () => <Clusters /> },
  { path: '/resource-groups', label: 'nav.resourceGroups', render: () => <ResourceGroups /> },
  { path: '/project-groups', label: 'nav.projectGroups', render: () => <ProjectGroups /> },
  { path: '/tasks', label: 'nav.tasks', render: () => <Tasks /> },
  { path: '/submit', label: 'nav.submit', render: () => <Submit /> },
  { path: '/usage', label: 'nav.usage', render: () => <Usage /> },
  { path: '/prices', label: 'nav.prices', render: () => <Prices /> },
  // Approvals concern project-group members and admins; viewers outside any group have nothing there.
  { path: '/approvals', label: 'nav.approvals', render: () => <Approvals />,
    when: (w, admin) => admin || Object.values(w.project_groups ?? {}).some((r) => r === 'admin' || r === 'member') },
  { path: '/alerts', label: 'nav.alerts', render: () => <Alerts /> },
  { path: '/audit', label: 'nav.audit', adminOnly: true, render: () => <Audit /> },
  { path: '/users', label: 'nav.users', adminOnly: true, render: () => <Users /> },
];

function useLocation(): [string, URLSearchParams, (to: string) => void] {
  const [loc, setLoc] = useState(() => window.location.pathname + window.location.search);
  useEffect(() => {
    const onPop = () => setLoc(window.location.pathname + window.location.search);
    window.addEventListener('popstate', onPop);
    return () => window.removeEventListener('popstate', onPop);
  }, []);
  const navigate = useCallback((to: string) => {
    window.history.pushState(null, '', to);
    setLoc(to);
    window.scrollTo(0, 0);
  }, []);
  const url = new URL(loc, window.location.origin);
  return [url.pathname, url.searchParams, navigate];
}

export function App() {
  const [lang, setLangState] = useState<Lang>(defaultLang);
  const [token, setToken] = useState<string | null>(savedToken);
  const [who, setWho] = useState<WhoAmI | null>(() => (savedToken() ? cachedWho() : null));
  const [path, search, navigate] = useLocation();

  const setLang = useCallback((l: Lang) => {
    localStorage.setItem('cubeplane.lang', l);
    setLangState(l);
  }, []);
  const i18n: I18n = useMemo(() => ({ lang, setLang, t: (k, v) => translate(lang, k, v) }), [lang, setLang]);
  useEffect(() => { document.documentElement.lang = lang; }, [lang]);

  const api = useMemo(() => (token ? new Api(token, lang) : null), [token, lang]);
  const logout = useCallback(() => { saveToken(null); setToken(null); setWho(null); }, []);

  // A saved token is checked once (the page shows at once with the last known
  // roles meanwhile); a refused one sends the user to the login page.
  const [checking, setChecking] = useState(!!token && !who);
  useEffect(() => {
    if (!token) { setChecking(false); return; }
    const ctl = new AbortController();
    new Api(token, 'en').get<WhoAmI>('/api/v1/whoami', ctl.signal).then(
      (w) => {
        saveToken(token, w);
        // The same answer as the cached one: keep the object, so the whole app does not render again.
        setWho((prev) => (prev && JSON.stringify(prev) === JSON.stringify(w) ? prev : w));
        setChecking(false);
      },
      (e: unknown) => {
        if (ctl.signal.aborted) return;
        if ((e as { status?: number }).status === 401) logout();
        setChecking(false);
      },
    );
    return () => ctl.abort();
  }, [token, logout]);

  const router = useMemo(() => ({ path, search, navigate }), [path, search, navigate]);

  let body: ReactNode;
  if (!token || !api || (!who && !checking)) {
    body = <Login onLogin={(tok, w) => { saveToken(tok, w); setToken(tok); setWho(w); }} />;
  } else if (!who) {
    body = <div className="state loading">{translate(lang, 'common.loading')}</div>;
  } else {
    const isAdmin = who.role === 'admin';
    const isGroupAdmin = Object.values(who.project_groups ?? {}).includes('admin');
    const session: Session = { api, who, isAdmin, isGroupAdmin, logout };
    body = (
      <SessionContext.Provider value={session}>
        <Shell routes={ROUTES.filter((r) => (!r.adminOnly || isAdmin) && (!r.when || r.when(who, isAdmin)))} />
      </SessionContext.Provider>
    );
  }
  return (
    <I18nContext.Provider value={i18n}>
      <RouterContext.Provider value={router}>{body}</RouterContext.Provider>
    </I18nContext.Provider>
  );
}

function Shell({ routes }: { routes: Route[] }) {
  const { path } = useRouter();
  const s = useSession();
  const { t, lang, setLang } = useI18n();
  let content: ReactNode;
  const taskMatch = /^\/tasks\/([^/]+)$/.exec(path);
  if (taskMatch) content = <TaskPage id={decodeURIComponent(taskMatch[1]!)} />;
  else content = routes.find((r) => r.path === path)?.render()
    ?? <div className="state empty">{t('common.unknownPage')}</div>;
  const role = s.isAdmin ? t('role.admin') : s.isGroupAdmin ? t('role.pgAdmin')
    : s.who.role === 'viewer' ? t('role.viewer') : t('role.user');
  return (
    <div className="shell">
      <nav className="side">
        <div className="brand">{t('app.title')}</div>
        <ul>
          {routes.map((r) => {
            const active = r.path === '/' ? path === '/' : path.startsWith(r.path);
            return (
              <li key={r.path}>
                <Link to={r.path} className={active ? 'active' : ''}>{t(r.label)}</Link>
              </li>
            );
          })}
        </ul>
        <div className="who">
          <div data-testid="whoami">{s.who.user}</div>
          <div className="muted">{role}</div>
          <button className="link" data-testid="lang-switch"
            onClick={() => setLang(lang === 'en' ? 'zh-CN' : 'en')}>{t('lang.switch')}</button>
          <button className="link" onClick={s.logout}>{t('nav.logout')}</button>
        </div>
      </nav>
      <main className="content"><Suspense fallback={<Loading />}>{content}</Suspense></main>
    </div>
  );
}
