import { describe, expect, it } from 'vitest';
import {
  attemptMessage, formatBytes, formatCpu, formatDuration, formatGpus, formatMillicores, formatNumber, formatReason,
  formatRelative, formatResource, jobCheck, parseQuantity, resourceLabel,
} from './format';
import { stateLabel, translate, dictionaries } from './i18n';

describe('quantities', () => {
  it('parses Kubernetes quantities', () => {
    expect(parseQuantity('500m')).toBe(0.5);
    expect(parseQuantity('4Gi')).toBe(4 * 2 ** 30);
    expect(parseQuantity('2')).toBe(2);
    expect(parseQuantity('1.5k')).toBe(1500);
    expect(parseQuantity(3)).toBe(3);
    expect(parseQuantity('abc')).toBeNaN();
    expect(parseQuantity('')).toBeNaN();
  });
  it('formats millicores as CPUs', () => {
    expect(formatMillicores(2500)).toBe('2.5 CPU');
    expect(formatMillicores(1000)).toBe('1 CPU');
    expect(formatMillicores(250)).toBe('0.25 CPU');
    expect(formatCpu('500m')).toBe('0.5 CPU');
    expect(formatCpu('16')).toBe('16 CPU');
  });
  it('formats bytes in binary units', () => {
    expect(formatBytes(32 * 2 ** 30)).toBe('32 GiB');
    expect(formatBytes(512 * 2 ** 20)).toBe('512 MiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(3 * 2 ** 40)).toBe('3 TiB');
  });
  it('formats plain numbers, keeping small ones visible', () => {
    expect(formatNumber(12.345, 2)).toBe('12.35');
    expect(formatNumber(3, 2)).toBe('3');
    expect(formatNumber(0.00248, 2)).toBe('0.0025');
    expect(formatNumber(0, 2)).toBe('0');
  });
  it('formats GPU counts', () => {
    expect(formatGpus(1)).toBe('1 GPU');
    expect(formatGpus(8)).toBe('8 GPUs');
    expect(formatGpus(4, 'nvidia-a100-80gb')).toBe('4 × nvidia-a100-80gb');
    expect(formatGpus(2, undefined, 'zh-CN')).toBe('2 块 GPU');
  });
  it('formats a resource by its name', () => {
    expect(formatResource('cpu', '2500m')).toBe('2.5 CPU');
    expect(formatResource('memory', '32Gi')).toBe('32 GiB');
    expect(formatResource('gpu/nvidia-l40s', '2')).toBe('2 GPUs');
    expect(resourceLabel('gpu/nvidia-l40s')).toBe('GPU nvidia-l40s');
    expect(resourceLabel('memory', 'zh-CN')).toBe('内存');
  });
});

describe('durations', () => {
  it('formats seconds compactly', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(45)).toBe('45s');
    expect(formatDuration(192)).toBe('3m 12s');
    expect(formatDuration(180)).toBe('3m');
    expect(formatDuration(7500)).toBe('2h 5m');
    expect(formatDuration(7200)).toBe('2h');
    expect(formatDuration(3 * 86400 + 4 * 3600 + 59)).toBe('3d 4h');
    expect(formatDuration(0.3)).toBe('<1s');
    expect(formatDuration(NaN)).toBe('—');
  });
  it('formats in Chinese', () => {
    expect(formatDuration(192, 'zh-CN')).toBe('3分12秒');
    expect(formatDuration(7500, 'zh-CN')).toBe('2小时5分');
  });
  it('formats relative times', () => {
    const now = 1_000_000_000;
    expect(formatRelative(now - 192_000, now)).toBe('3m 12s ago');
    expect(formatRelative(now + 7_500_000, now)).toBe('in 2h 5m');
    expect(formatRelative(now - 60_000, now, 'zh-CN')).toBe('1分前');
    expect(formatRelative(0, now)).toBe('—');
  });
});

describe('reasons', () => {
  const quota = {
    code: 'quota_exceeded',
    message: 'quota: gpu/nvidia-l40s 0 of 2 in use by rg-common-gpu, this task asks for 4',
    message_zh: '配额不足：rg-common-gpu 的 gpu/nvidia-l40s 已用 0/2，本任务申请 4',
    details: { resource: 'gpu/nvidia-l40s', used: 0, requested: 4, limit: 2, guaranteed: 2, resource_group: 'rg-common-gpu' },
  };
  it('words a quota refusal with its figures', () => {
    expect(formatReason(quota)).toBe(
      'Over quota: resource group rg-common-gpu has 0 of 2 nvidia-l40s GPUs in use, and this task asks for 4.');
    expect(formatReason(quota, 'zh-CN')).toBe(
      '配额不足：资源组 rg-common-gpu 的 GPU nvidia-l40s 已用 0/2，本任务申请 4。');
  });
  it('counts cpu in millicores and memory in bytes', () => {
    const r = { ...quota, details: { resource: 'cpu', used: 7500, requested: 2000, limit: 8000, resource_group: 'rg' } };
    expect(formatReason(r)).toBe('Over quota: resource group rg has 7.5 CPU of 8 CPU in use, and this task asks for 2 CPU.');
    const m = { ...quota, details: { resource: 'memory', used: 30 * 2 ** 30, requested: 4 * 2 ** 30, limit: 32 * 2 ** 30, resource_group: 'rg' } };
    expect(formatReason(m)).toContain('30 GiB of 32 GiB memory in use');
  });
  it('counts the nodes that do not fit', () => {
    const r = { code: 'no_matching_node', message: 'no node fits', details: { nodes_total: 12, maintenance: 3, gpu_type_mismatch: 9, nodes_fit: 0 } };
    expect(formatReason(r)).toBe('No node fits: 12 nodes; 3 in maintenance, 9 have another GPU type.');
    expect(formatReason(r, 'zh-CN')).toBe('没有可用的节点：共 12 个节点，其中 3 个处于维护中，9 个GPU 型号不符。');
  });
  it('names upstream tasks', () => {
    const r = { code: 'waiting_for_dependencies', message: 'x', details: { tasks: ['t-1'] } };
    expect(formatReason(r)).toBe('Waiting for 1 upstream task: t-1.');
  });
  it('says which storage pool a task is bound to and what it left out', () => {
    const r = {
      code: 'storage_pool', message: 'x',
      details: { storage_pool: 'p1', clusters_excluded: 1, usable: 0, pool_offline: 2, excluded: ['c'] },
    };
    expect(formatReason(r)).toBe(
      'Waits: storage pool p1 has no cluster online; 2 clusters of the pool offline, 1 cluster in other pools not considered.');
    expect(formatReason(r, 'zh-CN')).toBe(
      '等待：存储池 p1 中没有在线集群，该池 2 个集群离线，其他存储池的 1 个集群不予考虑。');
    const note = { ...r, details: { ...r.details, usable: 1, pool_offline: 0 } };
    expect(formatReason(note)).toBe(
      'Bound to storage pool p1, where its checkpoints and data are: 1 cluster in other pools not considered.');
    expect(formatReason({ code: 'storage_pool', message: 'server words', details: {} })).toBe('server words');
  });
  it('counts down to when a class may preempt and a fallback shape opens', () => {
    const now = Date.parse('2026-12-06T02:00:00.000Z');
    const later = { code: 'preemption_not_yet', message: 'x',
      details: { priority_class: 'urgent', preempt_after_s: 600, may_preempt_at: '2026-12-06T02:08:20.000Z' } };
    expect(formatReason(later, 'en', now)).toBe('Priority class urgent may preempt after 10m in the queue: in 8m 20s.');
    expect(formatReason(later, 'zh-CN', now)).toBe('优先级 urgent 排队 10分 后才可抢占：8分20秒后。');
    const shapes = { code: 'fallback_shapes', message: 'x', details: { shapes: [
      { shape: 1, after_s: 600, opens_at: '2026-12-06T02:05:00.000Z', tried: false, resources: 'gpu/nvidia-l40s=1' },
      { shape: 2, after_s: 60, opens_at: '2026-12-06T01:51:00.000Z', tried: true, resources: 'gpu/nvidia-t4=1' }] } };
    expect(formatReason(shapes, 'en', now)).toBe('Fallback shapes: gpu/nvidia-l40s=1 (in 5m); gpu/nvidia-t4=1 (tried).');
    expect(formatReason(shapes, 'zh-CN', now)).toBe('备选规格：gpu/nvidia-l40s=1（5分后）；gpu/nvidia-t4=1（已尝试）。');
  });
  it('falls back to the server message in the language asked for', () => {
    const r = { code: 'something_new', message: 'it waits', message_zh: '它在等待' };
    expect(formatReason(r)).toBe('it waits');
    expect(formatReason(r, 'zh-CN')).toBe('它在等待');
    expect(formatReason({ code: 'bare', message: '' })).toBe('bare');
  });
});

describe('Unknown attempts (a silent Slurm or Kubernetes cluster)', () => {
  const unknown = { state: 'Unknown', number: 1, cluster_id: 'cs', message: 'cluster cs silent since 2026-01-01: ...' };
  it('shows the server message in English and says in Chinese why it is not rerun and what decides', () => {
    expect(attemptMessage(unknown)).toBe(unknown.message);
    const zh = attemptMessage(unknown, 'zh-CN');
    expect(zh).toContain('第 1 次尝试可能仍在运行');
    expect(zh).toContain('cubeplane clusters confirm-lost cs');
    expect(attemptMessage({ ...unknown, state: 'Failed', message: 'exit 1' }, 'zh-CN')).toBe('exit 1');
  });
  it('names the state in both languages', () => {
    expect(stateLabel('en', 'Unknown')).toBe('Unknown');
    expect(stateLabel('zh-CN', 'Unknown')).toBe('状态未知');
  });
  it('tells the operator how to check that the jobs are gone', () => {
    expect(jobCheck('slurm')).toBe('squeue');
    expect(jobCheck('kubernetes')).toBe('kubectl get pods');
    const hint = translate('en', 'clusters.unknownHint', { n: 2, check: jobCheck('slurm'), id: 'cs' });
    expect(hint).toContain('2 attempts may still run');
    expect(hint).toContain('(squeue)');
    expect(hint).toContain('cubeplane clusters confirm-lost cs');
    expect(translate('zh-CN', 'clusters.unknownHint', { n: 2, check: 'squeue', id: 'cs' }))
      .toContain('cubeplane clusters confirm-lost cs');
  });
});

describe('i18n', () => {
  it('has every key in both languages', () => {
    const en = Object.keys(dictionaries.en).sort();
    expect(Object.keys(dictionaries['zh-CN']).sort()).toEqual(en);
    for (const k of en) expect(dictionaries['zh-CN'][k as keyof typeof dictionaries.en]).not.toBe('');
  });
  it('fills placeholders', () => {
    expect(translate('en', 'task.attempt', { n: 2 })).toBe('Attempt 2');
    expect(translate('zh-CN', 'task.attempt', { n: 2 })).toBe('第 2 次尝试');
  });
});
