import { useState } from 'react';
import { Api, ApiError, type WhoAmI } from '../api';
import { useI18n } from '../i18n';

export function Login({ onLogin }: { onLogin: (token: string, who: WhoAmI) => void }) {
  const { t, lang, setLang } = useI18n();
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');

  async function submit(e: React.FormEvent) {
    e.preventDefault();
    const tok = token.trim();
    if (!tok) return;
    setBusy(true);
    setError('');
    try {
      const who = await new Api(tok, lang).get<WhoAmI>('/api/v1/whoami');
      onLogin(tok, who);
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? t('login.bad') : (err as Error).message);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="login">
      <form onSubmit={submit} className="card">
        <h1>{t('login.title')}</h1>
        <p className="muted">{t('app.tagline')}</p>
        <label htmlFor="token">{t('login.token')}</label>
        <input id="token" name="token" type="password" autoComplete="off" value={token}
          onChange={(e) => setToken(e.target.value)} placeholder="cp_…" />
        <p className="hint">{t('login.tokenHint')}</p>
        {error && <div className="state error" role="alert">{error}</div>}
        <div className="row">
          <button type="submit" className="primary" disabled={busy || !token.trim()}>
            {busy ? t('login.checking') : t('login.submit')}
          </button>
          <button type="button" className="link" onClick={() => setLang(lang === 'en' ? 'zh-CN' : 'en')}>
            {t('lang.switch')}
          </button>
        </div>
      </form>
    </div>
  );
}
