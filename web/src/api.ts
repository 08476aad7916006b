// The REST client: bearer token, Accept-Language, JSON errors as ApiError.
import type { Lang, PendingReason } from './format';

export type Resources = Record<string, string>;

export interface WhoAmI {
  user: string;
  role: string;
  project_groups: Record<string, string>;
}

export interface Cluster {
  id: string;
  display_name: string;
  executor: string;
  labels: Record<string, string>;
  state: string;
  state_reason: string;
  state_message: string;
  last_contact: number;
  credential_expires_at: number;
  agent_version?: string;
  unknown_attempts?: number;  // attempts whose job may still run while the cluster is silent (confirm-lost)
}

export interface NodeDrift { kind: string; message: string; message_zh: string }
export interface GpuDevice { index: number; model: string; utilization: number }

export interface Node {
  cluster_id: string;
  name: string;
  capacity: Resources;
  allocatable: Resources;
  ready: boolean;
  not_ready_reason: string;
  maintenance: boolean;
  in_maintenance?: boolean;
  gpus: GpuDevice[];
  drift: NodeDrift[];
  effective_labels?: Record<string, string>;
  labels: Record<string, string>;
}

export interface QuotaEntry { guaranteed?: string; max?: string }

export interface ResourceGroupDoc {
  metadata: { name: string };
  spec: {
    clusters: string[];
    quota: Record<string, QuotaEntry>;
    cohort: string;
    placement: string;
    alerts?: { thresholds?: number[] };
  };
  status?: {
    used?: Resources;
    queued?: number;
    running?: number;
    oldest_queued_at?: number;
    borrowed?: Resources;
    lent?: Resources;
  };
}

export interface ProjectGroupDoc {
  metadata: { name: string };
  spec: {
    members: { user: string; role: string }[];
    default_resource_group: string;
    resource_groups: { name: string; approval?: string }[];
    monthly_budget?: { gpu_hours?: number };
  };
  /** With a monthly budget: this month's burn-down, computed by the server. */
  status?: { budget?: { month: string; gpu_hours?: BudgetMeasure; cost?: BudgetMeasure & { currency: string } } };
}

export interface BudgetMeasure {
  used: number;
  budget: number;
  percent: number;
  /** The month's end at the pace so far. */
  projected: number;
  runs_out_at?: string;
  exhausted?: boolean;
}

export interface Attempt {
  id: string;
  number: number;
  cluster_id: string;
  placements: { replica: number; node: string; gpu_indices: number[] }[];
  resources: Resources;
  state: string;
  exit_code: number;
  stop_reason: string;
  message: string;
  created_at: number;
  started_at: number;
  finished_at: number;
}

export interface Task {
  id: string;
  pipeline_id: string;
  name: string;
  project_group: string;
  resource_group: string;
  user: string;
  state: string;
  step: { command: string[]; resources: Resources; replicas: number };
  reasons: PendingReason[];
  assigned_cluster: string;
  storage_pool?: string;  // bound to this pool (after a loss, or checkpointing): later attempts stay in it
  exit_code: number;
  created_at: number;
  queued_at: number;
  started_at: number;
  finished_at: number;
  attempts: number | Attempt[];
}

export interface Explain {
  task_id: string;
  state: string;
  reasons: PendingReason[];
  attempts: Attempt[];
  summary: string;
  summary_zh: string;
}

export interface AlertDelivery {
  receiver: string;
  notify: string;
  state: string;
  attempts: number;
  last_error: string;
  next_at: number;
  delivered_at: number;
}

/** Times are epoch milliseconds; 0 means none. */
export interface Alert {
  id: string;
  fingerprint: string;
  rule: string;
  severity: 'warning' | 'critical' | string;
  state: 'pending' | 'firing' | 'resolved' | string;
  labels: Record<string, string>;
  summary: string;
  summary_zh: string;
  value: number;
  started_at: number;
  firing_at: number;
  resolved_at: number;
  updated_at: number;
  deliveries: AlertDelivery[];
}

export interface OverviewCell {
  gpu_utilization: number | null;
  allocation: number | null;
  queue_wait_s: number | null;
  failure_rate: number | null;
}

export interface Overview {
  now: string;
  bucket_s: number;
  buckets: string[];
  clusters: {
    id: string;
    name: string;
    state: string;
    reason: string;
    gpus: { total: number; allocated: number };
    cells: OverviewCell[];
  }[];
  totals: {
    gpus_by_type: { gpu_type: string; total: number; allocated: number; idle: number }[];
    nodes: number;
    nodes_ready: number;
    tasks_queued: number;
    tasks_running: number;
  };
  alerts: Alert[];
}

export interface List<T> { items: T[]; next_cursor?: string }

export type UsageRow = Record<string, string | number> & {
  gpu_hours?: number;
  gpu_seconds: number;
  cpu_core_seconds: number;
  memory_gib_seconds: number;
  attempts: number;
  /** Present when a price table exists. */
  cost_cents?: number;
  cost?: number;
  currency?: string;
};

/** GET /api/v1/usage/advice: a step's request against what it really used. */
export interface StepAdvice {
  project_group: string;
  step: string;
  attempts: number;
  samples: number;
  request: { cpu_milli: number; memory_bytes: number; gpus: number; gpu_type: string };
  cpu: { p50_milli: number; p95_milli: number; max_milli: number };
  memory: { p95_bytes: number; max_bytes: number };
  gpu: { utilization_p50: number; utilization_p95: number; memory_max_bytes: number } | null;
  advice: { resource: string; kind: string; suggest?: number; message: string; message_zh: string }[];
}

export interface PriceEntry { resource: string; per_hour: string; from: string }
export interface PriceTable {
  metadata: { name: string; updated_at: number };
  spec: { currency: string; prices: PriceEntry[] };
}

/** One audited request; before/after are the object's JSON around the change (null when none). */
export interface AuditEntry {
  id: string;
  at: number;
  user: string;
  method: string;
  path: string;
  route: string;
  status: number;
  remote_addr: string;
  request_id: string;
  request: unknown;
  before: unknown;
  after: unknown;
  error: string;
}

export type ApprovalState = 'pending' | 'approved' | 'denied' | 'revoked';
export interface Approval {
  id: string;
  project_group: string;
  resource_group: string;
  requested_by: string;
  reason: string;
  state: ApprovalState;
  decided_by: string;
  note: string;
  /** Epoch ms; 0 = no expiry. */
  expires_at: number;
  created_at: number;
  decided_at: number;
  /** Approved and not expired. */
  active: boolean;
}

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
    public details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const TOKEN_KEY = 'cubeplane.token';
const WHO_KEY = 'cubeplane.whoami';

export function savedToken(): string | null {
  return localStorage.getItem(TOKEN_KEY);
}
/** Saves (or with null, forgets) the token, with the whoami answer last seen for it. */
export function saveToken(token: string | null, who?: WhoAmI): void {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
  if (token && who) localStorage.setItem(WHO_KEY, JSON.stringify(who));
  else localStorage.removeItem(WHO_KEY);
}
export function cachedWho(): WhoAmI | null {
  try {
    const w = JSON.parse(localStorage.getItem(WHO_KEY) ?? 'null') as WhoAmI | null;
    return w && typeof w.user === 'string' ? w : null;
  } catch {
    return null;
  }
}

/** A request started by index.html before the app's code loaded (see there). */
interface EarlyAnswer { ok: boolean; status: number; text: string }
interface Early { path: string; token: string; lang: Lang; at: number; res: Promise<EarlyAnswer>; done?: EarlyAnswer }
declare global { interface Window { __cpEarly?: Early } }

function early(path: string, token: string, lang: Lang): Early | null {
  const e = typeof window === 'undefined' ? undefined : window.__cpEarly;
  if (!e || e.path !== path) return null;
  window.__cpEarly = undefined;
  return e.token === token && e.lang === lang && Date.now() - e.at < 10000 ? e : null;
}

/** The early request's data when it has already arrived (and succeeded); it is then used up. */
export function peekEarly<T>(path: string, token: string, lang: Lang): T | undefined {
  const e = typeof window === 'undefined' ? undefined : window.__cpEarly;
  if (!e?.done?.ok || e.path !== path) return undefined;
  const got = early(path, token, lang);
  try {
    return got?.done ? (JSON.parse(got.done.text) as T) : undefined;
  } catch {
    return undefined;
  }
}

export class Api {
  constructor(public token: string, public lang: Lang) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { Authorization: `Bearer ${this.token}`, 'Accept-Language': this.lang, ...extra };
  }

  async request(method: string, path: string, body?: string, contentType?: string, accept = 'application/json',
    signal?: AbortSignal): Promise<Response> {
    const headers = this.headers({ Accept: accept });
    if (contentType) headers['Content-Type'] = contentType;
    let res: Response;
    try {
      res = await fetch(path, { method, headers, body, signal });
    } catch (e) {
      if ((e as Error).name === 'AbortError') throw e;
      throw new ApiError(0, 'network', this.lang === 'zh-CN' ? '无法连接到服务器。' : 'Cannot reach the server.');
    }
    if (!res.ok) throw await toError(res, this.lang);
    return res;
  }

  async json<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    const res = await this.request(method, path, body === undefined ? undefined : JSON.stringify(body),
      body === undefined ? undefined : 'application/json', 'application/json', signal);
    return (await res.json()) as T;
  }

  async get<T>(path: string, signal?: AbortSignal): Promise<T> {
    const e = early(path, this.token, this.lang);
    if (e) {
      const got = await e.res.catch(() => null);
      if (got) {
        if (!got.ok) throw await toError(new Response(got.text, { status: got.status }), this.lang);
        return JSON.parse(got.text) as T;
      }
    }
    return this.json<T>('GET', path, undefined, signal);
  }

  async postYaml<T>(path: string, yaml: string): Promise<{ status: number; body: T }> {
    const res = await this.request('POST', path, yaml, 'application/yaml');
    return { status: res.status, body: (await res.json()) as T };
  }

  async putYaml<T>(path: string, yaml: string): Promise<T> {
    const res = await this.request('PUT', path, yaml, 'application/yaml');
    return (await res.json()) as T;
  }

  async text(path: string, accept: string): Promise<string> {
    return (await this.request('GET', path, undefined, undefined, accept)).text();
  }

  /** Streams a text body, calling onChunk with each decoded piece until the server closes it. */
  async stream(path: string, onChunk: (text: string) => void, signal: AbortSignal): Promise<void> {
    const res = await this.request('GET', path, undefined, undefined, 'text/plain', signal);
    if (!res.body) { onChunk(await res.text()); return; }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onChunk(decoder.decode(value, { stream: true }));
    }
    const rest = decoder.decode();
    if (rest) onChunk(rest);
  }
}

async function toError(res: Response, lang: Lang): Promise<ApiError> {
  let code = `http_${res.status}`;
  let message = '';
  let details: Record<string, unknown> = {};
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string; details?: Record<string, unknown> } };
    if (body.error) {
      code = body.error.code ?? code;
      message = body.error.message ?? '';
      details = body.error.details ?? {};
    }
  } catch {
    /* not JSON: keep the generic message */
  }
  if (!message) {
    message = lang === 'zh-CN' ? `服务器返回错误（HTTP ${res.status}）。` : `The server answered with an error (HTTP ${res.status}).`;
  }
  return new ApiError(res.status, code, message, details);
}

/** Query string from the set values only. */
export function qs(params: Record<string, string | number | undefined | null>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}
