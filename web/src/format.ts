// Formatting of quantities, durations, times and scheduler reasons for people.
// Pure functions: the language is passed in, so they are easy to test.

export type Lang = 'en' | 'zh-CN';

const BINARY: Record<string, number> = {
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};
const DECIMAL: Record<string, number> = {
  n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
};

/** Parses a Kubernetes-style quantity ("500m", "4Gi", "2", "1.5", 3) to a number; NaN when malformed. */
export function parseQuantity(q: string | number | null | undefined): number {
  if (q === null || q === undefined) return NaN;
  if (typeof q === 'number') return q;
  const m = /^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]{0,2})\s*$/.exec(q);
  if (!m) return NaN;
  const value = Number(m[1]);
  const suffix = m[2] ?? '';
  if (suffix in BINARY) return value * BINARY[suffix]!;
  if (suffix in DECIMAL) return value * DECIMAL[suffix]!;
  return NaN;
}

function trim(n: number, digits = 1): string {
  const s = n.toFixed(digits);
  return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

/** Millicores (or a cpu quantity string) as "2.5 CPU". */
export function formatMillicores(millicores: number): string {
  return `${trim(millicores / 1000, 2)} CPU`;
}

export function formatCpu(q: string | number): string {
  const cores = parseQuantity(q);
  if (Number.isNaN(cores)) return String(q);
  return `${trim(cores, 2)} CPU`;
}

/** Bytes in binary units: 34359738368 -> "32 GiB". */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.abs(bytes);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${bytes < 0 ? '-' : ''}${trim(v, 1)} ${units[i]}`;
}

export function formatGpus(count: number, type?: string, lang: Lang = 'en'): string {
  const n = trim(count, 2);
  const unit = lang === 'zh-CN' ? ' 块 GPU' : count === 1 ? ' GPU' : ' GPUs';
  return type ? `${n} × ${type}` : `${n}${unit}`;
}

/** Display of one resource amount by its name: cpu, memory, gpu/<type>, or other. */
export function formatResource(name: string, q: string | number, lang: Lang = 'en'): string {
  const v = parseQuantity(q);
  if (Number.isNaN(v)) return String(q);
  if (name === 'cpu') return formatCpu(v);
  if (name === 'memory' || name.endsWith('storage')) return formatBytes(v);
  if (name === 'gpu' || name.startsWith('gpu/')) return formatGpus(v, undefined, lang);
  return trim(v, 2);
}

/** An integer amount as the server counts it (cpu in millicores, memory in bytes). */
export function formatAmount(name: string, amount: number, lang: Lang = 'en'): string {
  if (name === 'cpu') return formatMillicores(amount);
  return formatResource(name, amount, lang);
}

/** A resource's name for people: "gpu/nvidia-a100-80gb" -> "GPU nvidia-a100-80gb". */
export function resourceLabel(name: string, lang: Lang = 'en'): string {
  if (name === 'cpu') return 'CPU';
  if (name === 'memory') return lang === 'zh-CN' ? '内存' : 'Memory';
  if (name.startsWith('gpu/')) return `GPU ${name.slice(4)}`;
  return name;
}

/** Seconds as "45s", "3m 12s", "2h 5m", "3d 4h". */
export function formatDuration(seconds: number, lang: Lang = 'en'): string {
  if (!Number.isFinite(seconds)) return '—';
  const zh = lang === 'zh-CN';
  const u = zh ? { d: '天', h: '小时', m: '分', s: '秒' } : { d: 'd', h: 'h', m: 'm', s: 's' };
  const sep = zh ? '' : ' ';
  let s = Math.max(0, Math.round(seconds));
  if (seconds > 0 && seconds < 1) return zh ? '不到 1 秒' : '<1s';
  const d = Math.floor(s / 86400); s -= d * 86400;
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d > 0) return h > 0 ? `${d}${u.d}${sep}${h}${u.h}` : `${d}${u.d}`;
  if (h > 0) return m > 0 ? `${h}${u.h}${sep}${m}${u.m}` : `${h}${u.h}`;
  if (m > 0) return s > 0 ? `${m}${u.m}${sep}${s}${u.s}` : `${m}${u.m}`;
  return `${s}${u.s}`;
}

/** Epoch milliseconds (0 = never) or RFC3339 as a local date-time string. */
export function formatTime(t: number | string | null | undefined, lang: Lang = 'en'): string {
  if (t === null || t === undefined || t === 0 || t === '') return '—';
  const d = typeof t === 'number' ? new Date(t) : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toLocaleString(lang === 'zh-CN' ? 'zh-CN' : 'en-GB', {
    year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
  });
}

/** "3m 12s ago" / "in 2h 5m" relative to now (both epoch ms). */
export function formatRelative(t: number, now: number, lang: Lang = 'en'): string {
  if (!t) return '—';
  const diff = (t - now) / 1000;
  const d = formatDuration(Math.abs(diff), lang);
  if (Math.abs(diff) < 1) return lang === 'zh-CN' ? '刚刚' : 'just now';
  if (diff < 0) return lang === 'zh-CN' ? `${d}前` : `${d} ago`;
  return lang === 'zh-CN' ? `${d}后` : `in ${d}`;
}

export function formatPercent(v: number | null | undefined, digits = 0): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  return `${v.toFixed(digits)}%`;
}

/** A number with `digits` decimals; small non-zero values keep two significant digits. */
export function formatNumber(v: number, digits = 1): string {
  if (!Number.isFinite(v)) return '—';
  if (v !== 0 && Math.abs(v) < 10 ** -digits) return String(Number(v.toPrecision(2)));
  return trim(v, digits);
}

// ------------------------------------------------------------------ reasons

export interface PendingReason {
  code: string;
  message: string;
  message_zh?: string;
  details?: Record<string, unknown>;
}

const MISFIT_KEYS = [
  'not_ready', 'maintenance', 'selector_mismatch', 'gpu_type_mismatch',
  'insufficient_cpu', 'insufficient_memory', 'insufficient_gpu', 'insufficient_other',
] as const;

const MISFIT_TEXT: Record<(typeof MISFIT_KEYS)[number], { en: string; zh: string }> = {
  not_ready: { en: 'not Ready', zh: '未就绪' },
  maintenance: { en: 'in maintenance', zh: '处于维护中' },
  selector_mismatch: { en: 'do not match the node selector', zh: '不匹配节点选择器' },
  gpu_type_mismatch: { en: 'have another GPU type', zh: 'GPU 型号不符' },
  insufficient_cpu: { en: 'lack free CPU', zh: 'CPU 不足' },
  insufficient_memory: { en: 'lack free memory', zh: '内存不足' },
  insufficient_gpu: { en: 'lack free GPUs', zh: 'GPU 不足' },
  insufficient_other: { en: 'lack another resource', zh: '其他资源不足' },
};

function num(v: unknown): number {
  return typeof v === 'number' ? v : typeof v === 'string' ? parseQuantity(v) : NaN;
}
function str(v: unknown): string {
  return typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v);
}
function list(v: unknown): string[] {
  return Array.isArray(v) ? v.map((x) => (typeof x === 'string' ? x : str((x as { task?: string })?.task ?? x))) : [];
}
function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * One readable sentence for a scheduler reason, with its figures. Known codes
 * are worded here from their details; others fall back to the server's
 * message in the language asked for.
 */
export function formatReason(r: PendingReason, lang: Lang = 'en', now: number = Date.now()): string {
  const zh = lang === 'zh-CN';
  const d = r.details ?? {};
  const fallback = zh && r.message_zh ? r.message_zh : r.message || r.code;
  // The time to go until a moment the server named, or "now" once it has passed.
  const until = (at: number) => (at > now ? formatRelative(at, now, lang) : zh ? '现在' : 'now');
  switch (r.code) {
    case 'quota_exceeded': {
      const res = str(d.resource);
      const used = num(d.used), req = num(d.requested), limit = num(d.limit);
      if (!res || [used, req, limit].some(Number.isNaN)) return fallback;
      const group = str(d.resource_group);
      if (res === 'cpu' || res === 'memory') {
        const a = (v: number) => formatAmount(res, v, lang);
        return zh
          ? `配额不足：资源组 ${group} 的${resourceLabel(res, lang)}已用 ${a(used)}，上限 ${a(limit)}，本任务申请 ${a(req)}。`
          : `Over quota: resource group ${group} has ${a(used)} of ${a(limit)}${res === 'memory' ? ' memory' : ''} in use, and this task asks for ${a(req)}.`;
      }
      const kind = res.startsWith('gpu/') ? res.slice(4) : res;
      const noun = res.startsWith('gpu') ? (res.startsWith('gpu/') ? `${kind} GPUs` : 'GPUs') : kind;
      return zh
        ? `配额不足：资源组 ${group} 的 ${resourceLabel(res, lang)} 已用 ${used}/${limit}，本任务申请 ${req}。`
        : `Over quota: resource group ${group} has ${used} of ${limit} ${noun} in use, and this task asks for ${req}.`;
    }
    case 'no_matching_node': {
      const total = num(d.nodes_total);
      if (Number.isNaN(total)) return fallback;
      const parts: string[] = [];
      for (const k of MISFIT_KEYS) {
        const n = num(d[k]);
        if (n > 0) parts.push(zh ? `${n} 个${MISFIT_TEXT[k].zh}` : `${n} ${MISFIT_TEXT[k].en}`);
      }
      return zh
        ? `没有可用的节点：共 ${total} 个节点${parts.length ? '，其中 ' + parts.join('，') : ''}。`
        : `No node fits: ${plural(total, 'node', 'nodes')}${parts.length ? '; ' + parts.join(', ') : ''}.`;
    }
    case 'waiting_for_dependencies': {
      const tasks = list(d.tasks);
      if (!tasks.length) return fallback;
      return zh
        ? `等待 ${tasks.length} 个上游任务完成：${tasks.join('、')}。`
        : `Waiting for ${plural(tasks.length, 'upstream task', 'upstream tasks')}: ${tasks.join(', ')}.`;
    }
    case 'cluster_offline': {
      const c = str(d.cluster);
      if (!c) return fallback;
      const why = str(d.state_reason);
      return zh
        ? `集群 ${c} 离线${why ? `（${why}）` : ''}。`
        : `Cluster ${c} is offline${why ? ` (${why})` : ''}.`;
    }
    case 'storage_pool': {
      // Bound to the storage pool of a lost (or checkpointing) attempt: other pools are not considered.
      const pool = str(d.storage_pool);
      const excluded = num(d.clusters_excluded), usable = num(d.usable), down = num(d.pool_offline);
      if (!pool || Number.isNaN(excluded) || Number.isNaN(usable)) return fallback;
      const others = excluded > 0
        ? (zh ? `其他存储池的 ${excluded} 个集群不予考虑` : `${plural(excluded, 'cluster', 'clusters')} in other pools not considered`)
        : '';
      if (usable > 0) {
        return zh
          ? `已绑定存储池 ${pool}（检查点和数据所在）${others ? '：' + others : ''}。`
          : `Bound to storage pool ${pool}, where its checkpoints and data are${others ? ': ' + others : ''}.`;
      }
      const offline = down > 0 ? (zh ? `该池 ${down} 个集群离线` : `${plural(down, 'cluster', 'clusters')} of the pool offline`) : '';
      const parts = [offline, others].filter((x) => x);
      return zh
        ? `等待：存储池 ${pool} 中没有在线集群${parts.length ? '，' + parts.join('，') : ''}。`
        : `Waits: storage pool ${pool} has no cluster online${parts.length ? '; ' + parts.join(', ') : ''}.`;
    }
    case 'preemption_not_yet': {
      // The server says from when (its words do not count down); the time to go is worked out here.
      const at = Date.parse(str(d.may_preempt_at));
      const after = num(d.preempt_after_s);
      if (Number.isNaN(at) || Number.isNaN(after)) return fallback;
      const cls = str(d.priority_class);
      const when = until(at);
      return zh
        ? `优先级 ${cls} 排队 ${formatDuration(after, lang)} 后才可抢占：${when}。`
        : `Priority class ${cls} may preempt after ${formatDuration(after, lang)} in the queue: ${when}.`;
    }
    case 'fallback_shapes': {
      const shapes = Array.isArray(d.shapes) ? (d.shapes as Record<string, unknown>[]) : [];
      if (!shapes.length) return fallback;
      const parts = shapes.map((s) => {
        const what = str(s.resources);
        if (s.tried === true) return zh ? `${what}（已尝试）` : `${what} (tried)`;
        const at = Date.parse(str(s.opens_at));
        if (Number.isNaN(at)) return what;
        return `${what}${zh ? '（' : ' ('}${until(at)}${zh ? '）' : ')'}`;
      });
      return zh ? `备选规格：${parts.join('；')}。` : `Fallback shapes: ${parts.join('; ')}.`;
    }
    case 'waiting_for_preemption': {
      const victims = Array.isArray(d.victims) ? d.victims.length : NaN;
      if (Number.isNaN(victims)) return fallback;
      return zh
        ? `正在等待 ${victims} 个被抢占的任务停止。`
        : `Waiting for ${plural(victims, 'preempted task', 'preempted tasks')} to stop.`;
    }
    default:
      return fallback;
  }
}

// ------------------------------------------------------------------ money

/** Integer cents as money, exactly: 123456, "USD" -> "1,234.56 USD". */
export function formatMoney(cents: number, currency = ''): string {
  if (!Number.isFinite(cents)) return '—';
  const neg = cents < 0;
  const c = Math.round(Math.abs(cents));
  const whole = Math.floor(c / 100).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  const frac = String(c % 100).padStart(2, '0');
  return `${neg ? '-' : ''}${whole}.${frac}${currency ? ` ${currency}` : ''}`;
}

// ------------------------------------------------------------------ diffs

/** A JSON value flattened to dotted paths ("spec.prices[0].per_hour") and display strings of its leaves. */
export function flatten(value: unknown, prefix = '', out: Map<string, string> = new Map()): Map<string, string> {
  if (Array.isArray(value)) {
    if (value.length === 0 && prefix) out.set(prefix, '[]');
    value.forEach((v, i) => flatten(v, `${prefix}[${i}]`, out));
  } else if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0 && prefix) out.set(prefix, '{}');
    for (const [k, v] of entries) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else if (prefix) {
    out.set(prefix, value === null ? 'null' : typeof value === 'string' ? value : String(value));
  }
  return out;
}

export interface FieldChange { path: string; kind: 'changed' | 'added' | 'removed'; before?: string; after?: string }

/** Field-by-field differences between two JSON values (null/undefined = absent), in path order. */
export function diffValues(before: unknown, after: unknown): FieldChange[] {
  const a = before === null || before === undefined ? new Map<string, string>() : flatten(before);
  const b = after === null || after === undefined ? new Map<string, string>() : flatten(after);
  const out: FieldChange[] = [];
  for (const [path, v] of a) {
    if (!b.has(path)) out.push({ path, kind: 'removed', before: v });
    else if (b.get(path) !== v) out.push({ path, kind: 'changed', before: v, after: b.get(path)! });
  }
  for (const [path, v] of b) if (!a.has(path)) out.push({ path, kind: 'added', after: v });
  const order = (p: string) => p.replace(/\[(\d+)\]/g, (_, n: string) => `[${n.padStart(6, '0')}]`);
  return out.sort((x, y) => (order(x.path) < order(y.path) ? -1 : order(x.path) > order(y.path) ? 1 : 0));
}

/** How an operator checks that a cluster's jobs are gone before confirming them lost. */
export function jobCheck(executor: string): string {
  if (executor === 'slurm') return 'squeue';
  if (executor === 'kubernetes') return 'kubectl get pods';
  return 'ps';
}

/**
 * What the attempt timeline says of an attempt: the server's message (English). For an Unknown one (its cluster
 * silent, its job perhaps still running) in Chinese too: why it is not rerun, and what decides.
 */
export function attemptMessage(a: { state: string; number: number; cluster_id: string; message: string },
  lang: Lang = 'en'): string {
  if (a.state !== 'Unknown' || lang !== 'zh-CN') return a.message;
  return `集群 ${a.cluster_id} 失联：第 ${a.number} 次尝试可能仍在运行；在其 agent 报告结束或平台管理员确认其已不存在`
    + `（cubeplane clusters confirm-lost ${a.cluster_id}）之前不会重新运行。`;
}
