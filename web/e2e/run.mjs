// End-to-end tests of the web UI: starts `cubeplane up` on port 0 with a
// throwaway data dir, drives Debian's chromium with playwright-core, and
// keeps a screenshot of every page. Prints "N passed, N failed".
//
// Env: CUBEPLANE_BIN (default ../build/release/cubeplane), CHROMIUM
// (default /usr/bin/chromium), E2E_ARTIFACTS (default web/e2e/artifacts),
// E2E_ONLY (run only the checks whose name contains it).
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const web = resolve(here, '..');
const repo = resolve(web, '..');
const bin = resolve(web, process.env.CUBEPLANE_BIN ?? '../build/release/cubeplane');
const artifacts = resolve(process.env.E2E_ARTIFACTS ?? join(here, 'artifacts'));
const started = Date.now();
mkdirSync(artifacts, { recursive: true });

let server;
let browser;
const dataDir = mkdtempSync(join(tmpdir(), 'cubeplane-e2e-'));
const results = [];
const skipped = [];
let mainPage = null; // screenshotted when a check fails
const DEMO_CLUSTERS = ['common-debug', 'proj-b-gpu', 'proj-c-cpu'];

function log(...a) { console.log(`[e2e ${((Date.now() - started) / 1000).toFixed(1)}s]`, ...a); }

async function until(what, fn, timeoutMs = 20000, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) { last = e; }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

function startServer() {
  return new Promise((resolveStart, reject) => {
    server = spawn(bin, ['up', '--config', join(repo, 'examples/demo-fleet.yaml'), '--data-dir', dataDir,
      '--listen', '127.0.0.1:0'], {
      cwd: repo, stdio: ['ignore', 'pipe', 'pipe'],
      // The agents measure what work uses every 200 ms (5 s by default), so
      // that the example steps, a second or two long, have figures.
      env: { ...process.env, CUBEPLANE_USE_SAMPLE_MS: '200' },
    });
    let out = '';
    const onData = (b) => {
      out += b.toString();
      const url = /UI and API:\s+(http:\/\/\S+?)\/?\s/.exec(out);
      const token = /admin token:\s+(\S+)/.exec(out);
      if (url && token) resolveStart({ url: url[1], token: token[1] });
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.on('exit', (code) => reject(new Error(`cubeplane up exited (${code}):\n${out.slice(-2000)}`)));
    setTimeout(() => reject(new Error(`cubeplane up did not print its URL in 30s:\n${out.slice(-2000)}`)), 30000);
  });
}

async function stopServer() {
  if (!server || server.exitCode !== null) return;
  server.kill('SIGINT');
  try {
    await until('the server to stop', () => server.exitCode !== null || server.signalCode !== null, 10000);
  } catch {
    server.kill('SIGKILL');
  }
}

async function api(base, token, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

async function apiYaml(base, token, method, path, yaml) {
  const res = await fetch(base + path, {
    method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/yaml' }, body: yaml,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** How many tasks the server holds (all pages). */
async function countTasks(base, token) {
  let n = 0;
  let cursor = '';
  for (;;) {
    const page = await api(base, token, 'GET', `/api/v1/tasks?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    n += page.items.length;
    if (!page.next_cursor) return n;
    cursor = page.next_cursor;
  }
}

// A real alert: rg-proj-c-cpu gets a 50 % watermark that fires at once (sustained 0s; the alert
// loop runs every 15 s), and a task holding 16 of its 24 guaranteed CPUs crosses it.
const WATERMARK_RG = `apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-proj-c-cpu}
spec:
  clusters: [proj-c-cpu]
  quota:
    cpu: {guaranteed: "24"}
    memory: {guaranteed: 96Gi}
  placement: spread
  default_request: {cpu: 500m, memory: 512Mi}
  alerts: {thresholds: [50], sustained: 0s}
`;
const FILL_PIPELINE = `apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: fill-quota, project_group: proj-c}
spec:
  steps:
    - name: hold
      command: ["/bin/sh", "-c", "echo holding; sleep 240"]
      resources: {cpu: "16", memory: 1Gi}
`;
// Prices for the cost checks: cpu at 3600 an hour (1 USD per core-second), so the seconds of CPU
// the suite's small tasks use come to a visible, non-zero cost.
const PRICES_BAD = `apiVersion: cubeplane/v1
kind: PriceTable
metadata: {name: default}
spec:
  currency: USD
  prices:
    - {resource: cpu, per_hour: "lots", from: 2026-01-01}
`;
const PRICES = `apiVersion: cubeplane/v1
kind: PriceTable
metadata: {name: default}
spec:
  currency: USD
  prices:
    - {resource: gpu/nvidia-a100-80gb, per_hour: "2.50", from: 2026-01-01}
    - {resource: gpu, per_hour: "1.00", from: 2026-01-01}
    - {resource: cpu, per_hour: "3600", from: 2026-01-01}
    - {resource: memory, per_hour: "0.005", from: 2026-01-01}
`;
// A project group whose use of rg-common-gpu needs an approval, with dave as a member.
const APPROVAL_PG = `apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj-appr}
spec:
  members: [{user: dave, role: member}]
  default_resource_group: rg-proj-c-cpu
  resource_groups: [{name: rg-common-gpu, approval: required}]
`;
const APPROVAL_PIPELINE = `apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: needs-approval, project_group: proj-appr}
spec:
  resource_group: rg-common-gpu
  steps:
    - name: a
      command: ["/bin/sh", "-c", "echo approved"]
      resources: {cpu: "1", memory: 256Mi}
`;

/** Integer cents as the UI shows them ("1,234.56 USD"). */
function money(cents, currency) {
  const whole = Math.floor(Math.abs(cents) / 100).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${cents < 0 ? '-' : ''}${whole}.${String(Math.abs(cents) % 100).padStart(2, '0')} ${currency}`;
}

const ALERT_EN = 'text=/resource group rg-proj-c-cpu uses \\d+% of its guaranteed cpu/';
const ALERT_ZH = 'text=/资源组 rg-proj-c-cpu 已使用保障配额 cpu 的 \\d+%/';

// Returned by a check that could not run here (said why in `skipped`): neither passed nor failed.
const SKIP = Symbol('skip');

async function check(name, fn) {
  // E2E_ONLY=text runs only the checks whose name contains it (e.g. E2E_ONLY='first useful paint').
  if (process.env.E2E_ONLY && !name.includes(process.env.E2E_ONLY)) return;
  const t0 = Date.now();
  try {
    if (await fn() === SKIP) { log(`SKIP ${name} (${Date.now() - t0} ms)`); return; }
    results.push({ name, ok: true });
    log(`PASS ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    results.push({ name, ok: false });
    log(`FAIL ${name}: ${e.stack ?? e}`);
    if (mainPage) await shot(mainPage, `FAIL-${results.length}`).catch(() => {});
  }
}

async function shot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
}

async function go(page, base, path) {
  await page.evaluate((p) => { window.history.pushState(null, '', p); window.dispatchEvent(new PopStateEvent('popstate')); }, path);
  await page.waitForURL(`${base}${path}`);
}

async function login(page, base, token) {
  await page.goto(base + '/');
  await page.fill('#token', token);
  await page.click('button[type=submit]');
  await page.waitForSelector('[data-testid=whoami]', { timeout: 15000 });
}

// Generated data for the performance check only (served by route interception):
// an overview of `count` clusters x 24 hourly buckets over `nodes` nodes.
function genOverview(count, nodes) {
  const bucket = 3600;
  const end = Math.floor(Date.now() / 1000 / bucket) * bucket;
  const buckets = Array.from({ length: 24 }, (_, i) => new Date((end - (23 - i) * bucket) * 1000).toISOString());
  const perCluster = Math.ceil(nodes / count);
  const clusters = Array.from({ length: count }, (_, c) => ({
    id: `cluster-${String(c).padStart(2, '0')}`, name: `cluster-${String(c).padStart(2, '0')}`, state: c % 17 === 5 ? 'degraded' : 'online',
    reason: '', gpus: { total: perCluster * 8, allocated: (c * 37) % (perCluster * 8) },
    cells: buckets.map((_, i) => i < 3 ? { gpu_utilization: null, allocation: null, queue_wait_s: null, failure_rate: null } : {
      gpu_utilization: (i * 37 + c * 11) % 100, allocation: (i * 23 + c * 7) % 100,
      queue_wait_s: ((i + c) % 6) * 120, failure_rate: ((i * 3 + c) % 10) / 40,
    }),
  }));
  const gpus = perCluster * count * 8;
  return {
    now: new Date().toISOString(), bucket_s: bucket, buckets, clusters,
    totals: {
      gpus_by_type: [{ gpu_type: 'nvidia-a100-80gb', total: gpus / 2, allocated: gpus / 4, idle: gpus / 4 },
        { gpu_type: 'nvidia-h100-80gb', total: gpus / 2, allocated: gpus / 8, idle: (gpus * 3) / 8 }],
      nodes, nodes_ready: nodes - 12, tasks_queued: 25000, tasks_running: 25000,
    },
    alerts: [],
  };
}

// One page of a generated task list of `total` tasks.
function genTasks(from, limit, total) {
  const states = ['Queued', 'Running', 'Succeeded', 'Failed'];
  const now = Date.now();
  const items = [];
  for (let i = from; i < Math.min(total, from + limit); i++) {
    const state = states[i % 4];
    items.push({
      id: `t-gen-${i}`, pipeline_id: `p-gen-${Math.floor(i / 3)}`, name: `step-${i % 3}`, project_group: `pg-${i % 20}`,
      resource_group: `rg-${i % 10}`, user: `user-${i % 50}`, state, step: { command: ['true'], resources: { cpu: '1' }, replicas: 1 },
      reasons: state === 'Queued' ? [{ code: 'quota_exceeded', message: 'quota', details: { resource: 'gpu/nvidia-a100-80gb', used: 8, requested: 2, limit: 8, resource_group: `rg-${i % 10}` } }] : [],
      assigned_cluster: state === 'Queued' ? '' : `cluster-${i % 64}`, exit_code: 0, created_at: now - i * 1000,
      queued_at: now - i * 1000, started_at: state === 'Queued' ? 0 : now - i * 900, finished_at: 0, attempts: 1,
    });
  }
  return { items, next_cursor: from + limit < total ? String(from + limit) : '' };
}

async function main() {
  const { url: base, token } = await startServer();
  log('server at', base);

  // A member of one project group, with a token.
  await api(base, token, 'POST', '/api/v1/users', { name: 'dave', role: 'user' });
  const pg = await api(base, token, 'GET', '/api/v1/project-groups/proj-c');
  pg.spec.members.push({ user: 'dave', role: 'member' });
  await api(base, token, 'PUT', '/api/v1/project-groups/proj-c', pg);
  const memberToken = (await api(base, token, 'POST', '/api/v1/users/dave/tokens', { description: 'e2e' })).token;
  await apiYaml(base, token, 'PUT', '/api/v1/resource-groups/rg-proj-c-cpu', WATERMARK_RG);
  const fillTask = (await apiYaml(base, token, 'POST', '/api/v1/pipelines', FILL_PIPELINE)).tasks[0].id;

  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--no-first-run', '--disable-dev-shm-usage'],
  });
  const ctx = await browser.newContext({ locale: 'en-US', viewport: { width: 1400, height: 900 }, acceptDownloads: true });
  const page = await ctx.newPage();
  mainPage = page;
  page.setDefaultTimeout(15000);
  const consoleErrors = [];
  page.on('pageerror', (e) => consoleErrors.push(String(e)));

  await check('login with a token', async () => {
    await page.goto(base + '/');
    await page.waitForSelector('#token');
    await shot(page, '00-login');
    await page.fill('#token', 'cp_not_a_token');
    await page.click('button[type=submit]');
    await page.waitForSelector('.login [role=alert]');
    await page.fill('#token', token);
    await page.click('button[type=submit]');
    await page.waitForSelector('[data-testid=whoami]');
    const who = await page.textContent('[data-testid=whoami]');
    if (who?.trim() !== 'admin') throw new Error(`whoami shows ${who}`);
  });

  await check('overview shows a heatmap row per demo cluster and the demo GPUs in the totals', async () => {
    await page.waitForSelector('[data-testid=heatmap]');
    for (const c of DEMO_CLUSTERS) await page.waitForSelector(`[data-testid=heatmap] [data-cluster=${c}]`);
    const rows = await page.locator('[data-testid=heatmap] [data-cluster]').count();
    if (rows !== DEMO_CLUSTERS.length) throw new Error(`${rows} heatmap rows`);
    const cols = await page.locator('[data-testid=heatmap] .hm-cols .hm-col').count();
    if (cols !== 24) throw new Error(`${cols} columns for 24 hours`);
    // The demo fleet: 8 A100s on proj-b-gpu, 2 L40S on common-debug.
    await page.waitForSelector('[data-testid=gpu-totals] tr[data-gpu-type=nvidia-a100-80gb] >> td:nth-child(2):text-is("8")');
    await page.waitForSelector('[data-testid=gpu-totals] tr[data-gpu-type=nvidia-l40s] >> td:nth-child(2):text-is("2")');
    for (const m of ['queue_wait_s', 'failure_rate', 'allocation', 'gpu_utilization']) {
      await page.click(`[data-metric=${m}]`);
      await page.waitForSelector(`[data-testid=heatmap][data-metric-shown=${m}]`);
    }
    await page.waitForSelector('[data-testid=heatmap-legend]');
    if (await page.locator('[_echarts_instance_]').count()) throw new Error('the overview uses ECharts (meant for the Usage page only)');
    await shot(page, '01-overview');
  });

  await check('clusters with nodes and the admin maintenance toggle', async () => {
    await page.click('nav >> text=Clusters');
    await page.waitForSelector('[data-testid=cluster-proj-b-gpu]');
    await page.click('[data-testid=cluster-proj-b-gpu] >> text=Show nodes');
    await page.waitForSelector('[data-testid=nodes-proj-b-gpu] >> text=b-gpu-1');
    await page.waitForSelector('[data-testid=maint-b-gpu-1]');
    await page.click('[data-testid=maint-b-gpu-1]');
    await page.waitForSelector('[data-testid=maint-b-gpu-1] >> text=End maintenance');
    await page.click('[data-testid=maint-b-gpu-1]');
    await page.waitForSelector('[data-testid=maint-b-gpu-1] >> text=Start maintenance');
    await shot(page, '02-clusters');
  });

  await check('resource groups show quota bars with watermarks', async () => {
    await page.click('nav >> text=Resource groups');
    await page.waitForSelector('[data-testid=rg-rg-proj-b-gpu] [data-testid="bar-gpu/nvidia-a100-80gb"]');
    const marks = await page.locator('[data-testid=rg-rg-proj-b-gpu] .qbar-mark').count();
    if (marks < 3) throw new Error(`only ${marks} watermark marks`);
    await shot(page, '03-resource-groups');
  });

  await check('project groups show members and budget', async () => {
    await page.click('nav >> text=Project groups');
    await page.waitForSelector('[data-testid=pg-proj-b] >> text=alice');
    await page.waitForSelector('[data-testid=pg-proj-b] >> text=GPU-hours used');
    await shot(page, '04-project-groups');
  });

  let trainTask = '';
  await check('the editor flags a YAML syntax error with its line', async () => {
    await page.click('nav >> text=Submit');
    await page.fill('[data-testid=yaml-editor]', 'apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: [x\n');
    await page.waitForSelector('[data-testid=yaml-problems] >> text=/line \\d+/');
    await shot(page, '05-submit-yaml-error');
    await page.fill('[data-testid=yaml-editor]',
      'apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: bad, project_group: proj-c}\nspec:\n  steps:\n'
      + '    - name: a\n      command: [ls]\n      resources: {cpu: "-1"}\n');
    await page.click('[data-testid=submit]');
    await page.waitForSelector('[data-testid=submit-result] [role=alert] >> text=spec.steps[0].resources.cpu');
    await shot(page, '06-submit-server-error');
  });

  await check("Validate checks with dry_run: an unknown resource group's error, nothing created", async () => {
    const before = await countTasks(base, token);
    await page.fill('[data-testid=yaml-editor]',
      'apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: nowhere, project_group: proj-c}\nspec:\n'
      + '  resource_group: rg-does-not-exist\n  steps:\n    - name: a\n      command: [ls]\n      resources: {cpu: "1"}\n');
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('/api/v1/pipelines') && r.request().method() === 'POST'),
      page.click('[data-testid=validate]'),
    ]);
    if (!new URL(res.url()).searchParams.get('dry_run')) throw new Error(`Validate posted to ${res.url()}`);
    const body = await res.json();
    if (res.status() !== 400 || body.error?.code !== 'unknown_reference') throw new Error(`${res.status()} ${JSON.stringify(body)}`);
    await page.waitForSelector('[data-testid=submit-result] [role=alert][data-code=unknown_reference] >> text=rg-does-not-exist');
    await shot(page, '06b-validate-unknown-rg');
    const after = await countTasks(base, token);
    if (after !== before) throw new Error(`Validate created tasks: ${before} -> ${after}`);
  });

  await check('submit hello.yaml from the editor', async () => {
    await page.fill('[data-testid=yaml-editor]', readFileSync(join(repo, 'examples/pipelines/hello.yaml'), 'utf8'));
    const before = await countTasks(base, token);
    await page.click('[data-testid=validate]');
    await page.waitForSelector('[data-testid=submit-result] .state.ok >> text=3');
    if (await countTasks(base, token) !== before) throw new Error('Validate created tasks');
    await page.click('[data-testid=submit]');
    await page.waitForSelector('[data-testid=submit-result] >> text=hello-cpu');
    await shot(page, '07-submitted');
    const href = await page.getAttribute('[data-testid=submit-result] a:text-is("train")', 'href');
    trainTask = decodeURIComponent(href.split('/').pop());
    await page.click('[data-testid=submit-result] a:text-is("train")');
    await page.waitForSelector('[data-testid=task-state]');
  });

  await check('the task reaches Succeeded and its logs are read', async () => {
    if (!trainTask) throw new Error('no task submitted');
    await page.waitForSelector('[data-testid=task-state] >> text=Succeeded', { timeout: 60000 });
    await page.waitForSelector('[data-testid=logs] >> text=trained', { timeout: 20000 });
    const logs = await page.textContent('[data-testid=logs]');
    if (!logs.includes('epoch 1')) throw new Error(`logs: ${logs}`);
    await page.waitForSelector('[data-testid=logs-status] >> text=End of log.', { timeout: 20000 });
    await page.waitForSelector('[data-testid=timeline] .tl-bar');
    await shot(page, '08-task-succeeded');
  });

  await check('live logs stream while a task runs', async () => {
    const created = await fetch(`${base}/api/v1/pipelines`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/yaml' },
      body: 'apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: ticker, project_group: proj-c}\nspec:\n  steps:\n'
        + '    - name: tick\n      command: ["/bin/sh", "-c", "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done"]\n'
        + '      resources: {cpu: "1", memory: 256Mi}\n',
    }).then((r) => r.json());
    const id = created.tasks[0].id;
    await go(page, base, `/tasks/${id}`);
    // A line appears before the task has ended: the log is followed, not fetched at the end.
    await page.waitForSelector('[data-testid=logs] >> text=tick 1', { timeout: 30000 });
    const state = await page.textContent('[data-testid=task-state]');
    const text = await page.textContent('[data-testid=logs]');
    if (state.includes('Succeeded') && text.includes('tick 6')) log('note: task ended before the first check');
    await page.waitForSelector('[data-testid=logs] >> text=tick 6', { timeout: 30000 });
  });

  await check("an over-quota task's reason is shown", async () => {
    await page.click('nav >> text=Submit');
    await page.fill('[data-testid=yaml-editor]', readFileSync(join(repo, 'examples/pipelines/over-quota.yaml'), 'utf8'));
    await page.click('[data-testid=submit]');
    await page.waitForSelector('[data-testid=submit-result] a:text-is("debug")');
    await page.click('[data-testid=submit-result] a:text-is("debug")');
    await page.waitForSelector('[data-testid=explain] li[data-code=quota_exceeded]', { timeout: 30000 });
    const text = await page.textContent('[data-testid=explain] li[data-code=quota_exceeded]');
    if (!/Over quota: .*0 of 2 nvidia-l40s GPUs.* asks for 4/.test(text)) throw new Error(`reason: ${text}`);
    await shot(page, '09-task-over-quota');
  });

  await check('the task list updates and filters', async () => {
    await page.click('nav >> text=Tasks');
    await page.waitForSelector('[data-testid=task-list] >> text=debug');
    await page.selectOption('[data-testid=filter-state]', 'Queued');
    await page.waitForURL(/state=Queued/);
    await until('only queued tasks', async () => {
      const states = await page.locator('[data-testid=task-list] tbody .badge').allTextContents();
      return states.length > 0 && states.every((s) => s === 'Queued');
    }, 10000);
    await shot(page, '10-tasks');
    await page.selectOption('[data-testid=filter-state]', '');
  });

  await check('usage and cost with charts', async () => {
    await page.click('nav >> text=Usage and cost');
    await page.waitForSelector('[data-testid=usage-month] canvas');
    await page.waitForSelector('[data-testid=usage-table] >> text=proj-c');
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=csv]')]);
    const path = join(artifacts, 'usage.csv');
    await download.saveAs(path);
    const csv = readFileSync(path, 'utf8');
    if (!csv.startsWith('month,project_group')) throw new Error(`csv: ${csv.slice(0, 80)}`);
    // Request against use: hello's train step, measured by its agent, once it has ended.
    await until('hello-cpu/train in the request-vs-use table', async () => {
      if (await page.$('[data-testid="advice-hello-cpu/train"]')) return true;
      await page.reload();
      await page.waitForSelector('[data-testid=usage-advice] table, [data-testid=usage-advice] .empty', { timeout: 5000 });
      return false;
    }, 30000, 1000);
    await shot(page, '11-usage');
  });

  await check('admin edits the price table (a field error inline, then saved) and everyone reads it', async () => {
    await page.click('nav >> text=Prices');
    await page.waitForSelector('[data-testid=price-editor]');
    await page.fill('[data-testid=price-yaml]', PRICES_BAD);
    await page.click('[data-testid=price-save]');
    await page.waitForSelector('[data-testid=price-result] [role=alert] >> text=spec.prices[0].per_hour');
    await shot(page, '11b-prices-error');
    await page.fill('[data-testid=price-yaml]', PRICES);
    await page.click('[data-testid=price-save]');
    await page.waitForSelector('[data-testid=price-result] >> text=The price table was saved.');
    await page.waitForSelector('[data-testid=price-table] tr[data-resource=cpu] >> text=3600 USD');
    await page.waitForSelector('[data-testid=price-table] tr[data-resource=cpu] >> text=per core-hour');
    await shot(page, '11c-prices');
  });

  await check('usage shows the cost of the tasks that ran: a Cost column, a total and a cost chart', async () => {
    // The cost of the suite's finished tasks, as the server reports it (hello.yaml has run by now).
    const total = await until('a non-zero cost from the server', async () => {
      const r = await api(base, token, 'GET', '/api/v1/usage?from=2020-01-01&to=2100-01-01&group_by=project_group');
      const cents = r.items.reduce((s, x) => s + (x.cost_cents ?? 0), 0);
      return cents > 0 && r.items.every((x) => typeof x.cost_cents === 'number') ? cents : 0;
    }, 30000, 1000);
    log(`usage cost from the server: ${money(total, 'USD')}`);
    await page.click('nav >> text=Usage and cost');
    await page.waitForSelector('[data-testid=usage-table] th:text-is("Cost")');
    await page.waitForSelector('[data-testid=usage-cost] canvas');
    await until('a non-zero cost in the table and the total', async () => {
      const cells = await page.locator('[data-testid=usage-cost-cell]').allTextContents();
      const shownTotal = await page.textContent('[data-testid=usage-total-cost] strong');
      if (cells.some((c) => /^[\d,]+\.\d\d USD$/.test(c.trim()) && c.trim() !== '0.00 USD')
        && /^[\d,]+\.\d\d USD$/.test(shownTotal.trim()) && shownTotal.trim() !== '0.00 USD') return true;
      await page.click('nav >> text=Prices');
      await page.click('nav >> text=Usage and cost');
      await page.waitForSelector('[data-testid=usage-table]');
      return false;
    }, 30000, 1000);
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=csv]')]);
    const path = join(artifacts, 'usage-cost.csv');
    await download.saveAs(path);
    const header = readFileSync(path, 'utf8').split('\n')[0];
    if (!header.includes('cost_cents')) throw new Error(`csv header: ${header}`);
    await shot(page, '11d-usage-cost');
  });

  await check('admin audit log: the price-table change listed, filtered by user, with a field-by-field diff', async () => {
    await page.click('nav >> text=Audit log');
    const row = '[data-testid=audit-list] tr[data-route="/api/v1/price-table"][data-status="200"]';
    await page.waitForSelector(row);
    await page.waitForSelector('[data-testid=audit-list] tr[data-route="/api/v1/price-table"][data-status="400"]');
    await page.click(`${row} [data-testid=audit-toggle]`);
    // The first table replaced an empty one: its prices show as added fields, with their values.
    await page.waitForSelector('[data-testid=audit-diff] tr.diff-added[data-path="spec.prices[0].resource"]');
    const diff = await page.textContent('[data-testid=audit-diff]');
    if (!diff.includes('3600') || !diff.includes('added')) throw new Error(`diff: ${diff.slice(0, 300)}`);
    if (/[{}]\s*"/.test(diff)) throw new Error(`the diff shows raw JSON: ${diff.slice(0, 300)}`);
    await shot(page, '19-audit');
    await page.fill('[data-testid=audit-user]', 'nobody-at-all');
    await page.waitForSelector('text=No audited actions match.');
    await page.fill('[data-testid=audit-user]', 'admin');
    await page.waitForSelector(row);
    const today = new Date().toISOString().slice(0, 10);
    await page.fill('[data-testid=audit-from]', today);
    await page.fill('[data-testid=audit-to]', today);
    await page.waitForSelector(row);
    await page.fill('[data-testid=audit-from]', '');
    await page.fill('[data-testid=audit-to]', '');
  });

  await check('approvals: refused submit -> request -> approve -> the submit passes', async () => {
    const probe = await fetch(`${base}/api/v1/approvals`, { headers: { Authorization: `Bearer ${token}` } });
    if (probe.status === 404) {
      skipped.push('approvals: GET /api/v1/approvals answers 404 (not in this server build yet)');
      return SKIP;
    }
    await apiYaml(base, token, 'PUT', '/api/v1/project-groups/proj-appr', APPROVAL_PG);
    const mctx = await browser.newContext({ locale: 'en-US', viewport: { width: 1400, height: 900 } });
    try {
      const m = await mctx.newPage();
      m.setDefaultTimeout(15000);
      await login(m, base, memberToken);
      await m.click('nav >> text=Submit');
      await m.fill('[data-testid=yaml-editor]', APPROVAL_PIPELINE);
      await m.click('[data-testid=submit]');
      await m.waitForSelector('[data-testid=submit-result] [role=alert][data-code=approval_required]');
      await m.waitForSelector('[data-testid=approval-needed] >> text=proj-appr');
      await shot(m, '20-submit-approval-required');
      await m.click('[data-testid=request-approval]');
      await m.waitForURL(/\/approvals\?/);
      await m.waitForSelector('[data-testid=approval-pg]');
      if (await m.inputValue('[data-testid=approval-pg]') !== 'proj-appr') throw new Error('project group not prefilled');
      if (await m.inputValue('[data-testid=approval-rg]') !== 'rg-common-gpu') throw new Error('resource group not prefilled');
      await m.fill('[data-testid=approval-reason]', 'e2e: debug on the shared GPUs');
      await m.click('[data-testid=approval-send]');
      await m.waitForSelector('[data-testid=approval-request-result] .state.ok');
      await m.waitForSelector('[data-testid=approval-list] tr[data-pg=proj-appr][data-state=pending]');
      // A plain member may not decide.
      if (await m.locator('[data-testid=approve]').count()) throw new Error('a member sees Approve');
      await shot(m, '21-approvals-member-pending');

      await page.click('nav >> text=Approvals');
      const pending = '[data-testid=approval-list] tr[data-pg=proj-appr][data-state=pending]';
      await page.waitForSelector(pending);
      await page.selectOption(`${pending} [data-testid=approval-expiry]`, '7');
      await page.fill(`${pending} [data-testid=approval-note]`, 'ok for a week');
      await page.click(`${pending} [data-testid=approve]`);
      await page.waitForSelector(pending, { state: 'detached' });
      await page.click('[data-tab=decided]');
      await page.waitForSelector('[data-testid=approval-list] tr[data-pg=proj-appr][data-state=approved] >> text=active');
      await shot(page, '22-approvals-decided');

      await m.click('nav >> text=Submit');
      await m.fill('[data-testid=yaml-editor]', APPROVAL_PIPELINE);
      await m.click('[data-testid=validate]');
      await m.waitForSelector('[data-testid=submit-result] .state.ok');
      await shot(m, '23-submit-approved');
    } finally {
      await mctx.close();
    }
  });

  await check('a real firing alert on the Alerts page and in the Overview', async () => {
    await until('the quota watermark alert to fire', async () => {
      const r = await api(base, token, 'GET', '/api/v1/alerts?state=firing');
      return r.items.some((a) => a.labels.resource_group === 'rg-proj-c-cpu');
    }, 60000, 1000);
    await page.click('nav >> text=Alerts');
    await page.waitForSelector(`[data-testid=alerts] tr[data-state=firing] >> ${ALERT_EN}`);
    const started = await page.textContent('[data-testid=alerts] tr[data-state=firing] td:nth-child(4)');
    if (!/\d{2}\/\d{2}\/\d{4}/.test(started ?? '')) throw new Error(`started at: ${started}`);
    await shot(page, '12-alerts');
    await page.click('nav >> text=Overview');
    await page.waitForSelector(`[data-testid=overview-alerts] [data-testid=alerts] >> ${ALERT_EN}`);
  });

  await check('admin sees the users page', async () => {
    await page.click('nav >> text=Users');
    await page.waitForSelector('text=dave');
    await shot(page, '13-users');
  });

  await check('switch to Chinese', async () => {
    await page.click('[data-testid=lang-switch]');
    await page.waitForSelector('nav >> text=总览');
    await page.click('nav >> text=资源组');
    await page.waitForSelector('text=水位线');
    await shot(page, '14-resource-groups-zh');
    await page.click('nav >> text=总览');
    await page.waitForSelector('text=全局汇总');
    await page.waitForSelector(`[data-testid=overview-alerts] >> ${ALERT_ZH}`);
    await shot(page, '15-overview-zh');
    await page.click('nav >> text=告警');
    await page.waitForSelector(`[data-testid=alerts] tr[data-state=firing] >> ${ALERT_ZH}`);
    await shot(page, '15b-alerts-zh');
    await page.click('[data-testid=lang-switch]');
    await page.waitForSelector('nav >> text=Overview');
  });

  await check('the alert resolves once the quota is freed, and shows under Resolved', async () => {
    await api(base, token, 'POST', `/api/v1/tasks/${fillTask}/cancel`);
    await until('the alert to resolve', async () => {
      const r = await api(base, token, 'GET', '/api/v1/alerts?state=resolved');
      return r.items.some((a) => a.labels.resource_group === 'rg-proj-c-cpu');
    }, 60000, 1000);
    await page.click('nav >> text=Alerts');
    await page.click('[data-alert-state=resolved]');
    await page.waitForSelector(`[data-testid=alerts] tr[data-state=resolved] >> ${ALERT_EN}`);
    await shot(page, '12b-alerts-resolved');
  });

  await check('a member does not see admin pages', async () => {
    const mctx = await browser.newContext({ locale: 'en-US', viewport: { width: 1400, height: 900 } });
    const m = await mctx.newPage();
    m.setDefaultTimeout(15000);
    await login(m, base, memberToken);
    const who = await m.textContent('[data-testid=whoami]');
    if (who.trim() !== 'dave') throw new Error(`whoami: ${who}`);
    const nav = await m.textContent('nav');
    if (nav.includes('Users')) throw new Error('member sees the Users page in the menu');
    if (nav.includes('Audit')) throw new Error('member sees the Audit log in the menu');
    await m.click('nav >> text=Prices');
    await m.waitForSelector('[data-testid=price-table] tr[data-resource=cpu]');
    if (await m.locator('[data-testid=price-editor]').count()) throw new Error('member sees the price editor');
    await m.click('nav >> text=Clusters');
    await m.click('[data-testid=cluster-proj-b-gpu] >> text=Show nodes');
    await m.waitForSelector('[data-testid=nodes-proj-b-gpu] >> text=b-gpu-1');
    if (await m.locator('[data-testid^=maint-]').count()) throw new Error('member sees maintenance toggles');
    await shot(m, '16-member-clusters');
    await go(m, base, '/users');
    await m.waitForSelector('text=No such page.');
    await shot(m, '17-member-users');
    await go(m, base, '/audit');
    await m.waitForSelector('text=No such page.');
    const audit = await fetch(`${base}/api/v1/audit`, { headers: { Authorization: `Bearer ${memberToken}` } });
    if (audit.status !== 403) throw new Error(`member GET /api/v1/audit: ${audit.status}`);
    await mctx.close();
  });

  await check("the heatmap's last column is filled from the server's samples (allocation)", async () => {
    await page.click('nav >> text=Overview');
    await page.click('[data-metric=allocation]');
    // The server samples each cluster once a minute (the sample taken as it starts finds no GPUs yet),
    // so this check comes late; it waits for the current column of the GPU clusters.
    await until('allocation in the last column', async () => {
      const v = await page.evaluate(() => ['proj-b-gpu', 'common-debug'].map((c) =>
        document.querySelector(`[data-testid=heatmap] [data-cluster=${c}]`)?.getAttribute('data-last') ?? ''));
      if (v.every((x) => x !== '')) return true;
      await page.click('nav >> text=Clusters');
      await page.click('nav >> text=Overview');
      await page.click('[data-metric=allocation]');
      return false;
    }, 90000, 2000);
    // proj-c-cpu has no GPUs: no allocation to show ("no data", not 0).
    await page.waitForSelector('[data-testid=heatmap] [data-cluster=proj-c-cpu][data-last=""]');
    // The hover box names the cell under the pointer: the last column of proj-b-gpu's row.
    const box = await page.locator('[data-testid=heatmap] canvas').boundingBox();
    const row = await page.locator('[data-testid=heatmap] [data-cluster]').evaluateAll((els) => els.map((e) => e.getAttribute('data-cluster')));
    await page.mouse.move(box.x + box.width - 3, box.y + row.indexOf('proj-b-gpu') * 22 + 11);
    await page.waitForSelector('[data-testid=heatmap-tip] >> text=Project B GPU cluster');
    const tip = await page.textContent('[data-testid=heatmap-tip]');
    if (!/GPU allocation: \d+%/.test(tip)) throw new Error(`hover box: ${tip}`);
    await shot(page, '01b-overview-allocation');
  });

  await check('first useful paint measured with 64 clusters, 10,000 nodes and 100,000 tasks (generated data)', async () => {
    const pctx = await browser.newContext({ locale: 'en-US', viewport: { width: 1400, height: 900 } });
    await pctx.addInitScript((tok) => localStorage.setItem('cubeplane.token', tok), token);
    // Long main-thread tasks ([start, duration] ms), to tell script start-up from rendering in perf.json.
    await pctx.addInitScript(() => {
      window.__longtasks = [];
      new PerformanceObserver((l) => {
        for (const e of l.getEntries()) window.__longtasks.push([Math.round(e.startTime), Math.round(e.duration)]);
      }).observe({ type: 'longtask', buffered: true });
    });
    const overview = genOverview(64, 10000);
    await pctx.route('**/api/v1/overview?*', (r) => r.fulfill({ json: overview }));
    await pctx.route('**/api/v1/tasks?*', (r) => {
      const u = new URL(r.request().url());
      const limit = Number(u.searchParams.get('limit') ?? 50);
      const from = Number(u.searchParams.get('cursor') || 0);
      return r.fulfill({ json: genTasks(from, limit, 100000) });
    });
    // One warm-up load (a cold browser process on 2 shared cores is not what a user meets),
    // then each page measured in a fresh tab.
    const warm = await pctx.newPage();
    await warm.goto(base + '/clusters');
    await warm.waitForSelector('[data-testid^=cluster-]');
    await warm.close();
    // Each page loaded RUNS times in a fresh tab; the median is held to the budget.
    const RUNS = 3;
    const timings = {};
    for (const [name, path, selector, mark] of [
      ['overview', '/', '[data-testid=heatmap] [data-cluster=cluster-63]', 'cp:overview-ready'],
      ['tasks', '/tasks', '[data-testid=task-list] tbody tr', 'cp:tasks-ready'],
    ]) {
      const runs = [];
      for (let i = 0; i < RUNS; i++) {
        const p = await pctx.newPage();
        await p.goto(base + path);
        await p.waitForSelector(selector);
        // The page marks itself ready a frame after it renders (useReadyMark): wait for the mark,
        // not just the rows, or a busy machine reads it before it is there. Its time is the same.
        await p.waitForFunction((m) => performance.getEntriesByName(m).length > 0, mark, { timeout: 15000 })
          .catch(() => {});  // never marked: reported below
        runs.push(await p.evaluate((m) => ({
          ready: performance.getEntriesByName(m)[0]?.startTime ?? null,
          fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null,
          rows: document.querySelectorAll('[data-testid=task-list] tbody tr').length,
          longtasks: window.__longtasks,
          cells: Number(document.querySelector('[data-testid=heatmap]')?.getAttribute('data-filled') ?? 0),
          scripts: performance.getEntriesByType('resource').map((e) => e.name.split('/').pop())
            .filter((n) => n.endsWith('.js')),
          // When the page's code and its data had arrived (ms since navigation start).
          js: Math.max(...performance.getEntriesByType('resource').filter((e) => e.name.endsWith('.js')).map((e) => e.responseEnd)),
          data: Math.max(0, ...performance.getEntriesByType('resource').filter((e) => /\/api\/v1\/(overview|tasks)\?/.test(e.name))
            .map((e) => e.responseEnd)),
          dataStart: Math.min(...performance.getEntriesByType('resource').filter((e) => /\/api\/v1\/(overview|tasks)\?/.test(e.name))
            .map((e) => e.startTime)),
        }), mark));
        if (i === 0) await shot(p, `18-perf-${name}`);
        await p.close();
      }
      if (runs.some((r) => r.ready === null)) throw new Error(`${name}: the page never marked itself ready`);
      const sorted = runs.map((r) => r.ready).sort((x, y) => x - y);
      timings[name] = { median: sorted[Math.floor(RUNS / 2)], runs: runs.map((r) => Math.round(r.ready)),
        fcp: runs.map((r) => Math.round(r.fcp ?? -1)), js: runs.map((r) => Math.round(r.js)),
        longtasks: runs.map((r) => r.longtasks),
        data_start: runs.map((r) => Math.round(r.dataStart)), data: runs.map((r) => Math.round(r.data)), rows: runs[0].rows, cells: runs[0].cells, scripts: runs[0].scripts };
    }
    await pctx.close();
    writeFileSync(join(artifacts, 'perf.json'), JSON.stringify(timings, null, 2));
    log(`first useful paint (median of ${RUNS}): overview ${timings.overview.median.toFixed(0)} ms `
      + `[${timings.overview.runs.join(', ')}] (${timings.overview.cells} heatmap cells with data), `
      + `tasks ${timings.tasks.median.toFixed(0)} ms [${timings.tasks.runs.join(', ')}] (${timings.tasks.rows} rows rendered of 100,000)`);
    const charting = timings.overview.scripts.filter((n) => /^Usage-|echarts/i.test(n));
    if (charting.length) throw new Error(`the overview loaded the charting chunk: ${charting.join(', ')}`);
    // The 1 s budget fails the check only with E2E_PERF_STRICT=1: on the shared 2-core machine a
    // concurrent build makes the figures swing by 2-3x (docs/benchmarks.md), so by default an overrun is reported.
    for (const [k, v] of Object.entries(timings)) {
      if (v.median <= 1000) continue;
      const msg = `${k}: first useful paint ${v.median.toFixed(0)} ms > 1000 ms (median of ${RUNS})`;
      if (process.env.E2E_PERF_STRICT === '1') throw new Error(msg);
      log(`PERF OVER BUDGET: ${msg}`);
    }
  });

  await check('no uncaught errors in the page', async () => {
    if (consoleErrors.length) throw new Error(consoleErrors.join('\n'));
  });
}

let fatal = null;
try {
  await main();
} catch (e) {
  fatal = e;
  console.error('e2e setup failed:', e.stack ?? e);
} finally {
  if (browser) await browser.close().catch(() => {});
  await stopServer();
  rmSync(dataDir, { recursive: true, force: true });
}
const passed = results.filter((r) => r.ok).length;
const failed = results.length - passed + (fatal ? 1 : 0);
log(`screenshots in ${artifacts}`);
for (const s of skipped) console.log(`e2e skipped: ${s}`);
console.log(`e2e: ${passed} passed, ${failed} failed${skipped.length ? `, ${skipped.length} skipped` : ''}`);
process.exit(failed ? 1 : 0);
