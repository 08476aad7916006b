import { useState } from 'react';
import { ApiError } from '../api';
import { formatTime } from '../format';
import { useI18n, type Key } from '../i18n';
import { Empty, ErrorBox, Page, Show, useLoad, useSession } from '../ui';

interface User { name: string; role: string; created_at?: number }

export function Users() {
  const { t, lang } = useI18n();
  const { api, isAdmin } = useSession();
  const l = useLoad((a, s) => a.get<{ items: User[] }>('/api/v1/users', s), []);
  const [name, setName] = useState('');
  const [role, setRole] = useState('user');
  const [error, setError] = useState<ApiError>();
  const [shown, setShown] = useState('');

  if (!isAdmin) return <Page title={t('users.title')}><Empty>{t('common.forbidden')}</Empty></Page>;

  async function act(fn: () => Promise<void>) {
    setError(undefined);
    try { await fn(); l.reload(); } catch (e) { if (e instanceof ApiError) setError(e); }
  }

  return (
    <Page title={t('users.title')}>
      <form className="filters card" onSubmit={(e) => {
        e.preventDefault();
        if (name.trim()) void act(async () => { await api.json('POST', '/api/v1/users', { name: name.trim(), role }); setName(''); });
      }}>
        <label>{t('users.name')}<input value={name} onChange={(e) => setName(e.target.value)} /></label>
        <label>{t('users.role')}
          <select value={role} onChange={(e) => setRole(e.target.value)}>
            {['user', 'viewer', 'admin'].map((r) => <option key={r} value={r}>{t(`role.${r}` as Key)}</option>)}
          </select>
        </label>
        <button type="submit" className="primary">{t('users.create')}</button>
      </form>
      {error && <ErrorBox error={error} />}
      {shown && <div className="state ok mono small">{shown}</div>}
      <div className="card">
        <Show l={l}>{(d) => d.items.length === 0 ? <Empty>{t('users.empty')}</Empty> : (
          <table className="table"><thead><tr><th>{t('common.name')}</th><th>{t('users.role')}</th>
            <th>{t('tasks.created')}</th><th>{t('common.actions')}</th></tr></thead>
          <tbody>{d.items.map((u) => (
            <tr key={u.name}><td>{u.name}</td><td>{t(`role.${u.role}` as Key) ?? u.role}</td>
              <td>{formatTime(u.created_at ?? 0, lang)}</td>
              <td><button className="small-btn" onClick={() => void act(async () => {
                const r = await api.json<{ token: string }>('POST', `/api/v1/users/${encodeURIComponent(u.name)}/tokens`, {});
                setShown(t('users.tokenShown', { user: u.name, token: r.token }));
              })}>{t('users.newToken')}</button></td></tr>
          ))}</tbody></table>
        )}</Show>
      </div>
    </Page>
  );
}
