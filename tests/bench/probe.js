// One request to check that a benchmark case answers what it should, before
// it is measured (Node >= 18, no packages).
//
//   node probe.js acquire URL BUCKET APP [KEY]      binary Acquire, decoded
//   node probe.js batch URL BUCKET APP NKEYS ITEMS  binary AcquireBatch of
//                                                   ITEMS random keys, summarised
//
// Prints one line, "status=200 ..." with what the reply held. Exit 0 when the
// server answered 200, 3 when it does not serve the procedure (404, or
// code unimplemented), 1 otherwise.
'use strict';

function varint(n) {
  const out = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b += 128;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
}

function field(tag, bytes) {
  return Buffer.concat([Buffer.from([(tag << 3) | 2]), varint(bytes.length), bytes]);
}

function acquireRequest(bucket, app, key) {
  const parts = [field(1, Buffer.from(bucket)), field(2, Buffer.from(app))];
  if (key) parts.push(field(3, Buffer.from(key)));
  parts.push(Buffer.from([4 << 3]), varint(1));
  return Buffer.concat(parts);
}

// Decodes a message into {tag: [values]}: numbers for varints, Buffers for
// length-delimited fields.
function decode(buf) {
  const out = {};
  let i = 0;
  const readVarint = () => {
    let v = 0, mul = 1, b;
    do {
      b = buf[i++];
      v += (b & 127) * mul;
      mul *= 128;
    } while (b & 128);
    return v;
  };
  while (i < buf.length) {
    const key = readVarint();
    const tag = Math.floor(key / 8), wt = key % 8;
    let v;
    if (wt === 0) v = readVarint();
    else if (wt === 2) { const n = readVarint(); v = buf.subarray(i, i + n); i += n; }
    else throw new Error(`wire type ${wt} not expected`);
    (out[tag] = out[tag] || []).push(v);
  }
  return out;
}

function acquireSummary(m) {
  const g = (t) => (m[t] ? m[t][0] : 0);
  return `allowed=${g(1) ? 'true' : 'false'} remaining=${g(2)} limit=${g(3)} ` +
         `retry_after_ms=${g(4)} reset_after_ms=${g(5)}`;
}

async function main() {
  const [mode, url, bucket, app, a5, a6] = process.argv.slice(2);
  let body;
  if (mode === 'acquire') {
    body = acquireRequest(bucket, app, a5 || '');
  } else if (mode === 'batch') {
    const nkeys = Number(a5), items = Number(a6);
    const parts = [];
    for (let i = 0; i < items; i++) {
      const k = `user-${String(Math.floor(Math.random() * nkeys)).padStart(6, '0')}`;
      parts.push(field(1, acquireRequest(bucket, app, k)));
    }
    body = Buffer.concat(parts);
  } else {
    console.error('usage: probe.js acquire|batch URL BUCKET APP ...');
    process.exit(2);
  }
  let res;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/proto', 'Connect-Protocol-Version': '1' },
      body,
    });
  } catch (e) {
    console.log(`status=none error=${JSON.stringify(String(e.cause || e))}`);
    process.exit(1);
  }
  const reply = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) {
    const text = reply.toString('utf8').slice(0, 300);
    console.log(`status=${res.status} body=${JSON.stringify(text)}`);
    process.exit(res.status === 404 || /unimplemented/.test(text) ? 3 : 1);
  }
  const m = decode(reply);
  if (mode === 'acquire') {
    console.log(`status=200 ${acquireSummary(m)}`);
    return;
  }
  const results = m[1] || [];
  let responses = 0, errors = 0, allowed = 0;
  const codes = {};
  for (const r of results) {
    const d = decode(r);
    if (d[1]) {
      responses++;
      if (decode(d[1][0])[1]) allowed++;
    } else if (d[2]) {
      errors++;
      const code = (decode(d[2][0])[1] || [Buffer.from('?')])[0].toString();
      codes[code] = (codes[code] || 0) + 1;
    }
  }
  console.log(`status=200 items=${results.length} responses=${responses} allowed=${allowed} ` +
              `errors=${errors}${errors ? ' codes=' + JSON.stringify(codes) : ''}`);
}

main().catch((e) => {
  console.log(`status=none error=${JSON.stringify(String(e))}`);
  process.exit(1);
});
