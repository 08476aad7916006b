#!/usr/bin/env node
// s3rver behind a front that checks AWS Signature Version 4, for the S3
// object store tests (tests/objstore/s3rver_fixture.cpp).
//
// s3rver 3.x parses a V4 Authorization header but does not compute the
// signature (lib/middleware/authentication.js: "Signature version 4
// calculation is unimplemented"), so on its own it accepts any secret. This
// front recomputes each request's signature the way S3 does, from the bytes
// on the wire (path and query decoded and re-encoded per RFC 3986, the
// signed headers, the SHA-256 of the body), answers SignatureDoesNotMatch /
// XAmzContentSHA256Mismatch / InvalidAccessKeyId / RequestTimeTooSkewed as S3
// would, and passes good requests to s3rver unchanged. A request without
// an Authorization header but with X-Amz-Algorithm in its query is a
// presigned URL (GET or HEAD), checked as S3 checks those: the signature over
// the query, X-Amz-Expires (at most 7 days) counted from X-Amz-Date.
//
//   client --> front (--address:--port) --verify--> s3rver (127.0.0.1:<ephemeral>)
//
// Requests reach s3rver one at a time (see passOn below).
//
// Test hooks, not signed, under /__cubeplane/:
//   POST /__cubeplane/fail?method=PUT&match=partNumber&status=500&times=2
//        the next `times` requests with that method whose URL contains
//        `match` are answered `status` with S3's InternalError/SlowDown body
//   GET  /__cubeplane/requests   every signed request so far, "METHOD URL" a line
//
// Prints "S3rver listening on <address>:<port>" once both servers listen.
// Exits when stdin closes, so that a test process that dies takes it along.
'use strict';

const crypto = require('crypto');
const http = require('http');
const S3rver = require('s3rver');

const ACCESS_KEY = 'S3RVER';  // the only account s3rver knows
const SECRET_KEY = 'S3RVER';
const MAX_SKEW_MS = 15 * 60 * 1000;

// s3rver makes ListObjectsV2 continuation tokens with DES, which OpenSSL 3
// keeps in its legacy provider, so Node 17+ throws "Unsupported cipher" and
// every truncated listing is a 500. The tokens are opaque to clients: when
// DES is missing, AES-128-CBC stands in (key and IV repeated to 16 bytes,
// the token layout unchanged).
try {
  crypto.createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8));
} catch (err) {
  const widen = b => Buffer.concat([Buffer.from(b), Buffer.from(b)]);
  const { createCipheriv, createDecipheriv } = crypto;
  crypto.createCipheriv = (alg, key, iv, ...rest) =>
    alg === 'des' ? createCipheriv('aes-128-cbc', widen(key), widen(iv), ...rest) : createCipheriv(alg, key, iv, ...rest);
  crypto.createDecipheriv = (alg, key, iv, ...rest) =>
    alg === 'des' ? createDecipheriv('aes-128-cbc', widen(key), widen(iv), ...rest) : createDecipheriv(alg, key, iv, ...rest);
}

function parseArgs(argv) {
  const opts = { address: '127.0.0.1', port: 0, directory: '', buckets: [], serviceEndpoint: 'localhost' };
  for (let i = 2; i < argv.length; i++) {
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
      return argv[++i];
    };
    switch (argv[i]) {
      case '--address': opts.address = next(); break;
      case '--port': opts.port = Number(next()); break;
      case '--directory': opts.directory = next(); break;
      case '--configure-bucket': opts.buckets.push(next()); break;
      case '--service-endpoint': opts.serviceEndpoint = next(); break;
      default: throw new Error(`unknown option ${argv[i]}`);
    }
  }
  if (!opts.directory) throw new Error('--directory is required');
  return opts;
}

// Percent-decodes to bytes ('+' stays '+', as S3 reads a path).
function percentDecode(s) {
  const bytes = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '%' && /^[0-9A-Fa-f]{2}$/.test(s.substr(i + 1, 2))) {
      bytes.push(parseInt(s.substr(i + 1, 2), 16));
      i += 2;
    } else {
      for (const b of Buffer.from(s[i], 'utf8')) bytes.push(b);
    }
  }
  return Buffer.from(bytes);
}

// RFC 3986 as SigV4 wants it: unreserved bytes stay, the rest is %XX.
function uriEncode(bytes) {
  let out = '';
  for (const b of bytes) {
    const ch = String.fromCharCode(b);
    out += /[A-Za-z0-9\-._~]/.test(ch) ? ch : '%' + b.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

function escapeXml(s) {
  return String(s).replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]);
}

let requestCounter = 0;
function s3Error(res, status, code, message, extra = {}) {
  const fields = Object.entries({ Code: code, Message: message, ...extra, RequestId: `front-${++requestCounter}` })
    .map(([k, v]) => `<${k}>${escapeXml(v)}</${k}>`)
    .join('');
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error>${fields}</Error>`;
  res.writeHead(status, { 'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function hmac(key, data) {
  return crypto.createHmac('sha256', key).update(data, 'utf8').digest();
}

// The request's query as [name, value] pairs of decoded bytes (Buffers:
// a value need not be UTF-8, and is signed as the bytes it is).
function queryPairs(rawQuery) {
  return rawQuery.split('&').filter(Boolean).map(pair => {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? '' : pair.slice(eq + 1);
    return [percentDecode(name), percentDecode(value)];
  });
}

// Names and values encoded, sorted by name then value, as SigV4 signs them.
function canonicalQueryOf(pairs) {
  return pairs.map(([n, v]) => [uriEncode(n), uriEncode(v)])
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))
    .map(([n, v]) => `${n}=${v}`).join('&');
}

function splitUrl(url) {
  const q = url.indexOf('?');
  return { rawPath: q < 0 ? url : url.slice(0, q), rawQuery: q < 0 ? '' : url.slice(q + 1) };
}

function canonicalUriOf(rawPath) {
  return rawPath.split('/').map(seg => uriEncode(percentDecode(seg))).join('/');
}

// "20130524T000000Z" -> ms, or NaN.
function parseAmzDate(s) {
  const dm = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s || '');
  return dm ? Date.UTC(+dm[1], +dm[2] - 1, +dm[3], +dm[4], +dm[5], +dm[6]) : NaN;
}

// The signature S3 expects: hex HMAC of the string to sign, with the
// account's signing key for that date and region.
function expectedSignature(canonicalRequest, amzDate, date, region) {
  const scope = `${date}/${region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope,
    crypto.createHash('sha256').update(canonicalRequest, 'utf8').digest('hex')].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${SECRET_KEY}`, date), region), 's3'), 'aws4_request');
  return { stringToSign, signature: crypto.createHmac('sha256', key).update(stringToSign, 'utf8').digest('hex') };
}

// Canonical header lines for the signed names, or null when one is missing.
function canonicalHeadersOf(req, signedNames) {
  const lines = signedNames.map(name => {
    const value = req.headers[name];
    if (value === undefined) return null;
    return `${name}:${String(value).trim().replace(/\s+/g, ' ')}\n`;
  });
  return lines.includes(null) ? null : lines.join('');
}

const MAX_PRESIGNED_EXPIRES_S = 604800;  // 7 days, S3's limit

// A presigned URL (query-string authentication), checked as S3 does: the
// X-Amz-* parameters are the Authorization header's parts, the signature
// covers every query parameter but X-Amz-Signature, the payload is
// UNSIGNED-PAYLOAD, and instead of the 15-minute skew the URL lives
// X-Amz-Expires seconds from X-Amz-Date. GET and HEAD only: the store
// presigns reads, nothing else.
function verifyPresigned(req) {
  const badQuery = message => [400, 'AuthorizationQueryParametersError', message];
  const { rawPath, rawQuery } = splitUrl(req.url);
  const pairs = queryPairs(rawQuery);
  const param = name => {
    const found = pairs.find(([n]) => n.toString('utf8') === name);
    return found ? found[1].toString('utf8') : undefined;
  };
  if (param('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256') {
    return badQuery('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"');
  }
  for (const name of ['X-Amz-Credential', 'X-Amz-Signature', 'X-Amz-Date', 'X-Amz-SignedHeaders', 'X-Amz-Expires']) {
    if (param(name) === undefined) {
      return badQuery('Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, ' +
        'X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.');
    }
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return [403, 'AccessDenied', `Access Denied (the test front accepts presigned ${req.method} for GET and HEAD only)`];
  }
  const credential = param('X-Amz-Credential');
  const [accessKey, date, region, service, terminator, ...extra] = credential.split('/');
  if (accessKey !== ACCESS_KEY) {
    return [403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.'];
  }
  const amzDate = param('X-Amz-Date');
  const when = parseAmzDate(amzDate);
  if (isNaN(when)) return badQuery('X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd\'T\'HHmmss\'Z\'"');
  if (date !== amzDate.slice(0, 8) || service !== 's3' || terminator !== 'aws4_request' || !region || extra.length) {
    const scope = credential.split('/').slice(1).join('/');
    return badQuery(`Error parsing the X-Amz-Credential parameter; the credential scope ${scope} is invalid.`);
  }
  const expiresText = param('X-Amz-Expires');
  if (!/^\d+$/.test(expiresText)) return badQuery('X-Amz-Expires should be a number');
  const expires = Number(expiresText);
  if (expires > MAX_PRESIGNED_EXPIRES_S) {
    return badQuery('X-Amz-Expires must be less than a week (in seconds); that is, the given X-Amz-Expires must be ' +
      'less than 604800 seconds');
  }
  const now = Date.now();
  if (now > when + expires * 1000) {
    return [403, 'AccessDenied', 'Request has expired', {
      'X-Amz-Expires': expiresText,
      Expires: new Date(when + expires * 1000).toISOString().replace(/\.\d+/, ''),
      ServerTime: new Date(now).toISOString().replace(/\.\d+/, ''),
    }];
  }
  const signedNamesText = param('X-Amz-SignedHeaders');
  const signedNames = signedNamesText.split(';');
  if (!signedNames.includes('host')) return badQuery('host must be a signed header');
  const canonicalHeaders = canonicalHeadersOf(req, signedNames);
  if (canonicalHeaders === null) return [403, 'AccessDenied', 'A signed header is missing from the request'];

  const canonicalQuery = canonicalQueryOf(pairs.filter(([n]) => n.toString('utf8') !== 'X-Amz-Signature'));
  const canonicalRequest = [req.method, canonicalUriOf(rawPath), canonicalQuery, canonicalHeaders, signedNamesText,
    'UNSIGNED-PAYLOAD'].join('\n');
  const { stringToSign, signature } = expectedSignature(canonicalRequest, amzDate, date, region);
  if (signature !== param('X-Amz-Signature')) {
    return [403, 'SignatureDoesNotMatch',
      'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
      { AWSAccessKeyId: accessKey, StringToSign: stringToSign, CanonicalRequest: canonicalRequest }];
  }
  return null;
}

// Returns null when the request is signed correctly, else [status, code, message, extra].
function verify(req, body) {
  const auth = req.headers['authorization'];
  if (!auth && queryPairs(splitUrl(req.url).rawQuery).some(([n]) => n.toString('utf8') === 'X-Amz-Algorithm')) {
    return verifyPresigned(req);
  }
  if (!auth) return [403, 'AccessDenied', 'Access Denied (the test front requires signed requests)'];
  const m = /^AWS4-HMAC-SHA256 Credential=([^,]+),\s*SignedHeaders=([^,]+),\s*Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return [400, 'AuthorizationHeaderMalformed', 'The authorization header is malformed.'];
  const [accessKey, date, region, service, terminator] = m[1].split('/');
  if (accessKey !== ACCESS_KEY) {
    return [403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.'];
  }
  const amzDate = req.headers['x-amz-date'] || '';
  const when = parseAmzDate(amzDate);
  if (isNaN(when)) return [403, 'AccessDenied', 'AWS authentication requires a valid x-amz-date header'];
  if (Math.abs(Date.now() - when) > MAX_SKEW_MS) {
    return [403, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.'];
  }
  if (date !== amzDate.slice(0, 8) || service !== 's3' || terminator !== 'aws4_request' || !region) {
    return [400, 'AuthorizationHeaderMalformed', `The credential scope ${m[1].split('/').slice(1).join('/')} is invalid.`];
  }
  const signedNames = m[2].split(';');
  if (!signedNames.includes('host')) return [400, 'AuthorizationHeaderMalformed', 'host must be a signed header'];
  const declaredHash = req.headers['x-amz-content-sha256'];
  if (!declaredHash) return [400, 'InvalidRequest', 'Missing required header for this request: x-amz-content-sha256'];
  const bodyHash = crypto.createHash('sha256').update(body).digest('hex');
  if (declaredHash !== 'UNSIGNED-PAYLOAD' && declaredHash !== bodyHash) {
    return [400, 'XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed.",
      { ClientComputedContentSHA256: declaredHash, S3ComputedContentSHA256: bodyHash }];
  }

  const { rawPath, rawQuery } = splitUrl(req.url);
  const canonicalHeaders = canonicalHeadersOf(req, signedNames);
  if (canonicalHeaders === null) return [403, 'AccessDenied', 'A signed header is missing from the request'];

  const canonicalRequest = [req.method, canonicalUriOf(rawPath), canonicalQueryOf(queryPairs(rawQuery)),
    canonicalHeaders, m[2], declaredHash].join('\n');
  const { stringToSign, signature: expected } = expectedSignature(canonicalRequest, amzDate, date, region);
  if (expected !== m[3]) {
    return [403, 'SignatureDoesNotMatch',
      'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
      { AWSAccessKeyId: accessKey, StringToSign: stringToSign, CanonicalRequest: canonicalRequest }];
  }
  return null;
}

async function main() {
  const opts = parseArgs(process.argv);
  const backend = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: opts.directory,
    serviceEndpoint: opts.serviceEndpoint,
    configureBuckets: opts.buckets.map(name => ({ name, configs: [] })),
  });
  const { port: backendPort } = await backend.run();

  const faults = [];  // {method, match, status, times}
  const seen = [];

  // One request at a time reaches s3rver. It is not safe under concurrency
  // as S3 is: a PUT racing a DELETE that prunes the key's directory crashes
  // it (an unhandled ENOENT from its write stream), and a GET racing a PUT
  // of the same key can read a half-written file, where S3 PUTs are atomic.
  // In a queue, each request is answered whole before the next starts.
  let queue = Promise.resolve();
  const passOn = task => {
    queue = queue.then(() => new Promise(task)).catch(() => {});
  };
  const forward = (req, res, body) => done => {
    const upstream = http.request(
      { host: '127.0.0.1', port: backendPort, method: req.method, path: req.url, headers: req.headers },
      ures => {
        res.writeHead(ures.statusCode, ures.headers);
        ures.pipe(res);
        ures.on('end', done);
        ures.on('error', done);
      });
    res.on('close', done);  // the client went away: next request
    upstream.on('error', err => {
      if (!res.headersSent) s3Error(res, 502, 'InternalError', `front: s3rver unreachable: ${err.message}`);
      else res.destroy();
      done();
    });
    upstream.end(body);
  };

  const front = http.createServer((req, res) => {
    const chunks = [];
    req.on('error', () => {});  // a client that hangs up mid-request is no reason to crash
    res.on('error', () => {});
    req.on('data', c => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url.startsWith('/__cubeplane/')) {
        const url = new URL(req.url, 'http://front');
        if (url.pathname === '/__cubeplane/fail' && req.method === 'POST') {
          faults.push({
            method: url.searchParams.get('method') || '',
            match: url.searchParams.get('match') || '',
            status: Number(url.searchParams.get('status') || 500),
            times: Number(url.searchParams.get('times') || 1),
          });
          res.writeHead(204).end();
        } else if (url.pathname === '/__cubeplane/requests') {
          res.writeHead(200, { 'Content-Type': 'text/plain' }).end(seen.join('\n'));
        } else {
          res.writeHead(404).end();
        }
        return;
      }
      const refused = verify(req, body);
      if (refused) return s3Error(res, ...refused);
      seen.push(`${req.method} ${req.url}`);
      const fault = faults.find(f => f.times > 0 && (!f.method || f.method === req.method) && req.url.includes(f.match));
      if (fault) {
        fault.times--;
        return fault.status === 503
          ? s3Error(res, 503, 'SlowDown', 'Please reduce your request rate.')
          : s3Error(res, fault.status, 'InternalError', 'We encountered an internal error. Please try again.');
      }
      passOn(forward(req, res, body));
    });
  });
  front.listen(opts.port, opts.address, () => {
    const { address, port } = front.address();
    process.stdout.write(`S3rver listening on ${address}:${port}\n`);
  });

  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
  process.on('SIGTERM', () => process.exit(0));
}

main().catch(err => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
