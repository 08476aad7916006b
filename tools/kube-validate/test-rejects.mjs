#!/usr/bin/env node
// The negative test of validate.mjs (CTest kube_validate_rejects_bad_objects):
// runs it on testdata/invalid.yaml and checks that it exits 1 and that each
// document got the answer its "# expect:" line names, the valid ones "ok" and
// each invalid one a "bad" line with the expected path and message. A
// validator that passed everything, or failed the file for one object only,
// fails this test.
//
// Then the unknown-field check on real objects: every mapping of the
// deploy/kubernetes manifests that is not a free-form map (labels, data,
// limits...) gets a key of its own, one copy per mapping, and each copy must
// be refused with that key named. The check rests on how the compiled
// validators read their input (validate.mjs, step 3); this is what tells if a
// new kubernetes-models stops reading that way.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
const file = join(here, 'testdata', 'invalid.yaml');
const validator = join(here, 'validate.mjs');

// One expectation per document, in order (documents are separated by "---"
// lines, as validate.mjs numbers them from 1).
const expectations = readFileSync(file, 'utf8')
  .split(/^---[ \t]*$/m)
  .map((doc, i) => ({ n: i + 1, expect: doc.match(/^# expect: (.*)$/m)?.[1]?.trim() }));

const run = spawnSync(process.execPath, [validator, file], { encoding: 'utf8' });
process.stdout.write(run.stdout);
process.stderr.write(run.stderr);

const failures = [];
if (run.status !== 1) failures.push(`validate.mjs exited ${run.status} (signal ${run.signal}), not 1`);
const lines = run.stdout.split('\n').filter((l) => l.length > 0);
for (const { n, expect } of expectations) {
  if (!expect) {
    failures.push(`document #${n} of ${file} has no "# expect:" line`);
    continue;
  }
  // "file#N " or "file#N/items/I " (list items)
  const mine = lines.filter((l) => l.includes(`${file}#${n} `) || l.includes(`${file}#${n}/`));
  if (mine.length === 0) {
    failures.push(`document #${n}: no output line`);
  } else if (expect === 'ok') {
    if (!mine.every((l) => l.startsWith('ok  '))) failures.push(`document #${n}: expected ok, got: ${mine.join(' | ')}`);
  } else if (!mine.some((l) => l.startsWith('bad ') && l.includes(expect))) {
    failures.push(`document #${n}: expected a bad line containing "${expect}", got: ${mine.join(' | ')}`);
  }
}
const extra = lines.filter((l) => !expectations.some(({ n }) => l.includes(`${file}#${n} `) || l.includes(`${file}#${n}/`)));
if (extra.length > 0) failures.push(`lines for no document: ${extra.join(' | ')}`);

// Free-form maps: any key is valid there.
const mapKeys = new Set(['labels', 'annotations', 'matchLabels', 'nodeSelector', 'data', 'stringData', 'binaryData',
  'requests', 'limits']);
const isMap = (obj, path) => mapKeys.has(path[path.length - 1]) ||
  (obj.kind === 'Service' && path.join('/') === 'spec/selector');
const mutants = [];
for (const name of ['server.yaml', 'agent.yaml', 'secret.example.yaml']) {
  const text = readFileSync(join(here, '..', '..', 'deploy', 'kubernetes', name), 'utf8');
  for (const doc of parseAllDocuments(text)) {
    const obj = doc.toJS();
    if (!obj) continue;
    const paths = [];
    const walk = (v, path) => {
      if (v === null || typeof v !== 'object') return;
      if (!Array.isArray(v) && !isMap(obj, path)) paths.push(path);
      for (const k of Object.keys(v)) walk(v[k], [...path, k]);
    };
    walk(obj, []);
    for (const path of paths) {
      const copy = structuredClone(obj);
      let at = copy;
      for (const k of path) at = at[k];
      at.zzUnknownField = 'x';
      mutants.push({ from: `${name} ${obj.kind} ${obj.metadata?.name}`, where: ['', ...path, 'zzUnknownField'].join('/'), copy });
    }
  }
}
const dir = mkdtempSync(join(tmpdir(), 'kube-validate-'));
try {
  const mfile = join(dir, 'mutants.yaml');
  writeFileSync(mfile, mutants.map((m) => stringify(m.copy)).join('---\n'));
  const mrun = spawnSync(process.execPath, [validator, mfile], { encoding: 'utf8' });
  const mlines = mrun.stdout.split('\n').filter((l) => l.length > 0);
  if (mrun.status !== 1) failures.push(`mutants: validate.mjs exited ${mrun.status}, not 1`);
  mutants.forEach((m, i) => {
    const line = mlines.find((l) => l.includes(`${mfile}#${i + 1} `)) ?? '(no line)';
    if (!line.startsWith('bad ') || !line.includes(`${m.where} unknown field`)) {
      failures.push(`unknown field ${m.where} in ${m.from} not reported: ${line}`);
    }
  });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

if (failures.length > 0) {
  console.error(`FAILED (${failures.length}):\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log(`passed: ${expectations.length} documents of ${file}, each answered as expected; ` +
  `an unknown field in each of ${mutants.length} mappings of deploy/kubernetes, each reported`);
