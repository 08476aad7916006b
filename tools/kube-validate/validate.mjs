#!/usr/bin/env node
// Checks Kubernetes objects against the upstream schemas, without a cluster.
//
//   node tools/kube-validate/validate.mjs FILE...
//
// Each FILE is YAML (any number of documents) or JSON. Every object, and every
// item of a `v1 List`, is checked in three steps:
//
//   1. apiVersion and kind are present and name a built-in Kubernetes type that
//      kubernetes-models knows (anything else, a CRD included, is an error:
//      an object we cannot check must not pass as checked);
//   2. the type's schema, through the class's own `.validate()` (kubernetes-
//      models compiles the upstream OpenAPI document with ajv): types, formats
//      (int32, int-or-string), enums, required fields;
//   3. fields the schema does not have. The upstream schema declares no
//      `additionalProperties: false`, so kubernetes-models accepts a misspelt
//      `readinesProbe` or `spec.replica` silently, whereas the API server
//      (field validation Strict, the kubectl default since 1.27) refuses it.
//      The compiled validator reads every property it knows, and enumerates
//      the keys of the maps it allows (labels, data, limits...), so the object
//      is validated a second time behind a Proxy that records those reads: a
//      key of an object that was neither read nor enumerated is unknown.
//
// plus `metadata.name` (or `generateName`), which the schema leaves optional
// but no API server does. Not checked: a CRD's openAPIV3Schema (JSON Schema
// with x-kubernetes-* extensions the generated validator lacks), and what only
// the API server's own validation knows (a selector that matches the pod
// labels, a template without containers: the OpenAPI schema marks neither).
//
// YAML is read as YAML 1.1, like kubectl (sigs.k8s.io/yaml): `yes`/`on` are
// booleans there, so `ENABLED: yes` in a ConfigMap is refused as it would be
// by the API server. Duplicate keys are errors.
//
// Output: one line per object,
//   ok  deploy/kubernetes/agent.yaml#2 apps/v1 Deployment cubeplane-agent
//   bad deploy/kubernetes/agent.yaml#3 v1 Service x : /spec/ports/0/port must be integer
// (#N is the document's number in the file, from 1; list items add /items/I).
// Exit status: 0 all valid, 1 anything invalid, 2 usage error (no file, a
// file that cannot be read).
import { readFileSync } from 'node:fs';

function usage(message) {
  if (message) process.stderr.write(`validate.mjs: ${message}\n`);
  process.stderr.write('usage: node validate.mjs FILE...   (YAML or JSON Kubernetes objects)\n');
  process.exit(2);
}

// Without its packages every kind would look unknown: say what is missing.
let parseAllDocuments;
try {
  ({ parseAllDocuments } = await import('yaml'));
  await import('kubernetes-models/v1');
} catch (e) {
  process.stderr.write(`validate.mjs: ${e.message}\n  install the packages first: scripts/install-npm-deps.sh (npm ci in tools/kube-validate)\n`);
  process.exit(2);
}

// apiVersion "v1" is the core group (kubernetes-models/v1); "apps/v1" and
// "rbac.authorization.k8s.io/v1" are the group's subpath. The pattern keeps
// anything else (paths, "..") out of import().
const apiVersionPattern = /^(?:[a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?$/;
const modules = new Map();

async function modelClass(apiVersion, kind) {
  if (!apiVersionPattern.test(apiVersion)) return null;
  if (!modules.has(apiVersion)) {
    let mod = null;
    try {
      mod = await import(`kubernetes-models/${apiVersion}`);
    } catch (e) {
      if (e?.code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED' && e?.code !== 'ERR_MODULE_NOT_FOUND') throw e;
    }
    modules.set(apiVersion, mod);
  }
  const mod = modules.get(apiVersion);
  // The module also exports the nested types (DeploymentSpec...), which
  // have no apiVersion/kind of their own: only top-level kinds count.
  const cls = mod && Object.hasOwn(mod, kind) ? mod[kind] : null;
  if (typeof cls !== 'function' || cls.apiVersion !== apiVersion || cls.kind !== kind) return null;
  return cls;
}

function pointer(path) {
  return path.length === 0 ? '/' : '/' + path.join('/');
}

function schemaErrors(err) {
  // ajv's errors (ValidationError.errors): path and message of each, the
  // property named for `required` and `additionalProperties`.
  if (!Array.isArray(err?.errors)) return [String(err?.message ?? err)];
  return err.errors.map((e) => {
    const where = e.instancePath === '' ? '/' : e.instancePath;
    if (e.keyword === 'required') return `${where} must have required property '${e.params.missingProperty}'`;
    let msg = `${where} ${e.message}`;
    if (e.keyword === 'enum' && Array.isArray(e.params?.allowedValues)) {
      msg += ` (${e.params.allowedValues.join(', ')})`;
    }
    return msg;
  });
}

// Validates `data` again behind proxies that record, per object, which keys
// the compiled validator read (get/has) and whether it enumerated the keys
// (maps). Returns the paths of keys it never looked at.
function unknownFields(cls, data) {
  const seen = new Map();  // target object -> {read: Set, enumerated: bool}
  const proxies = new Map();
  const track = (target) => {
    if (target === null || typeof target !== 'object') return target;
    if (proxies.has(target)) return proxies.get(target);
    const rec = { read: new Set(), enumerated: false };
    seen.set(target, rec);
    const proxy = new Proxy(target, {
      get(t, key, receiver) {
        rec.read.add(key);
        return track(Reflect.get(t, key, receiver));
      },
      has(t, key) {
        rec.read.add(key);
        return Reflect.has(t, key);
      },
      ownKeys(t) {
        rec.enumerated = true;
        return Reflect.ownKeys(t);
      },
    });
    proxies.set(target, proxy);
    return proxy;
  };
  try {
    cls.prototype.validate.call(track(data));
  } catch {
    // Already reported by the plain validation; here only the reads matter.
  }
  const unknown = [];
  const walk = (value, path) => {
    if (value === null || typeof value !== 'object') return;
    const rec = seen.get(value);
    if (!rec) return;  // never reached: its parent key is reported instead
    if (Array.isArray(value)) {
      value.forEach((v, i) => walk(v, [...path, i]));
      return;
    }
    for (const key of Object.keys(value)) {
      // A CRD's schema is JSON Schema plus Kubernetes extensions, which the
      // generated validator does not know (x-kubernetes-*): not checked.
      if (key === 'openAPIV3Schema') continue;
      if (!rec.enumerated && !rec.read.has(key)) {
        unknown.push(`${pointer([...path, key])} unknown field`);
        continue;
      }
      walk(value[key], [...path, key]);
    }
  };
  walk(data, []);
  return unknown;
}

async function check(obj) {
  // -> {label, problems[]}
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    return { label: '-', problems: ['/ is not an object (a Kubernetes object is a mapping)'] };
  }
  const apiVersion = typeof obj.apiVersion === 'string' ? obj.apiVersion : '';
  const kind = typeof obj.kind === 'string' ? obj.kind : '';
  const name = obj.metadata?.name ?? obj.metadata?.generateName ?? '-';
  const label = `${apiVersion || '?'} ${kind || '?'} ${name}`;
  const problems = [];
  if (!apiVersion) problems.push('/apiVersion is missing');
  if (!kind) problems.push('/kind is missing');
  if (problems.length > 0) return { label, problems };
  const cls = await modelClass(apiVersion, kind);
  if (!cls) return { label, problems: [`/ unknown apiVersion/kind ${apiVersion} ${kind} (not a built-in type kubernetes-models knows; nothing was checked)`] };
  try {
    new cls(obj).validate();
  } catch (e) {
    problems.push(...schemaErrors(e));
  }
  problems.push(...unknownFields(cls, obj));
  const meta = obj.metadata;
  if (meta === undefined || meta === null || (!meta.name && !meta.generateName)) {
    problems.push('/metadata/name is missing');
  }
  return { label, problems };
}

async function main(argv) {
  const files = argv.slice(2);
  if (files.length === 0) usage('no file given');
  for (const f of files) {
    if (f === '-h' || f === '--help') usage();
    if (f.startsWith('-')) usage(`unknown option ${f}`);
  }
  const texts = [];
  for (const f of files) {
    try {
      texts.push(readFileSync(f, 'utf8'));
    } catch (e) {
      usage(`cannot read ${f}: ${e.message}`);
    }
  }

  let bad = 0;
  let total = 0;
  const report = (where, label, problems) => {
    total++;
    if (problems.length === 0) {
      console.log(`ok  ${where} ${label}`);
    } else {
      bad++;
      console.log(`bad ${where} ${label} : ${problems.join('; ')}`);
    }
  };
  for (let i = 0; i < files.length; i++) {
    const docs = parseAllDocuments(texts[i], { version: '1.1', uniqueKeys: true, prettyErrors: false });
    const list = Array.isArray(docs) ? docs : [docs];  // one EmptyStream when the file is empty
    let n = 0;
    for (const doc of list) {
      n++;
      const where = `${files[i]}#${n}`;
      if (doc.errors?.length > 0) {
        report(where, '- - -', doc.errors.map((e) => `YAML: ${e.message.split('\n')[0]}`));
        continue;
      }
      const obj = doc.toJS({ maxAliasCount: 100 });
      if (obj === null || obj === undefined) continue;  // an empty document (comments, a trailing ---)
      if (obj && typeof obj === 'object' && obj.kind === 'List' && obj.apiVersion === 'v1') {
        if (!Array.isArray(obj.items)) {
          report(where, 'v1 List -', ['/items must be a list']);
          continue;
        }
        for (let j = 0; j < obj.items.length; j++) {
          const { label, problems } = await check(obj.items[j]);
          report(`${where}/items/${j}`, label, problems);
        }
        continue;
      }
      const { label, problems } = await check(obj);
      report(where, label, problems);
    }
  }
  if (total === 0) {
    console.log('bad no Kubernetes object in the files given');
    return 1;
  }
  return bad === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv);
