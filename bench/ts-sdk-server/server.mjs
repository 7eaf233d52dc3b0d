// Reference MCP server for `openphone bench mcp`: the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json) serving Streamable HTTP on loopback,
// with one tool, `openphone_device_status`, whose result carries the same text (and the same
// structured content) as the daemon's answer to that tool on the simulated phone. It is the
// "typical MCP server" reference of issue 13: the daemon's MCP figures are compared with this
// server's, measured in the same run.
//
// Usage: node server.mjs [--port N]   (default 0: any free port)
// Prints one line `listening on http://127.0.0.1:<port>/mcp` once it accepts connections.
//
// Protocol eras: the SDK 1.32.2 knows the handshake revisions up to 2025-11-25 (initialize,
// Mcp-Session-Id, SSE answers). It cannot serve the 2026-07-28 per-request era: a request
// without a session is refused here with HTTP 400, and the SDK's transport would refuse the
// `MCP-Protocol-Version: 2026-07-28` header with 400 too ("Unsupported protocol version"). So
// `bench mcp --era 2026-07-28` cannot target it; compare that era with its 2025-11-25 figure.
// One session (one McpServer and one transport) per `initialize`, as the SDK's own stateful
// example does; a session ends on DELETE or when the process stops.

import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const MAX_BODY_BYTES = 1024 * 1024;
const MAX_SESSIONS = 1024;

function parsePort(argv) {
  const i = argv.indexOf('--port');
  if (i === -1) return 0;
  const port = Number(argv[i + 1]);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`--port must be an integer from 0 to 65535, not ${argv[i + 1]}`);
    process.exit(2);
  }
  return port;
}

// The daemon's `openphone.device.status` result on the simulated phone, captured once; both
// reference servers answer with it. JSON.stringify keeps the file's (sorted) key order, which
// is the daemon's order, so the text is byte-for-byte the daemon's text.
const fixture = JSON.parse(
  readFileSync(new URL('../fixtures/device-status.json', import.meta.url), 'utf8'),
);
const fixtureText = JSON.stringify(fixture);

function newServer() {
  const server = new McpServer({ name: 'openphone-bench-reference', version: '0.0.0' });
  server.registerTool(
    'openphone_device_status',
    {
      description: 'Battery, network, foreground app and the next calendar event (fixed answer).',
      inputSchema: { reason: z.string() },
    },
    async () => ({
      content: [{ type: 'text', text: fixtureText }],
      structuredContent: fixture,
    }),
  );
  return server;
}

/** Session id → transport. */
const sessions = new Map();

function jsonError(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message } }));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const path = new URL(req.url, 'http://localhost').pathname;
  if (path !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  const sessionId = req.headers['mcp-session-id'];
  if (req.method !== 'POST') {
    // GET (the server-to-client stream) and DELETE (end of session) need a session.
    const transport = sessionId && sessions.get(sessionId);
    if (!transport) {
      jsonError(res, sessionId ? 404 : 400, 'no such session');
      return;
    }
    await transport.handleRequest(req, res);
    return;
  }
  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    jsonError(res, 400, `unreadable body: ${e.message}`);
    return;
  }
  if (sessionId) {
    const transport = sessions.get(sessionId);
    if (!transport) {
      jsonError(res, 404, 'no such session');
      return;
    }
    await transport.handleRequest(req, res, body);
    return;
  }
  if (!isInitializeRequest(body)) {
    jsonError(res, 400, 'no Mcp-Session-Id: send initialize first');
    return;
  }
  if (sessions.size >= MAX_SESSIONS) {
    jsonError(res, 503, 'too many sessions');
    return;
  }
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, transport),
  });
  transport.onclose = () => {
    if (transport.sessionId) sessions.delete(transport.sessionId);
  };
  await newServer().connect(transport);
  await transport.handleRequest(req, res, body);
}

const httpServer = createServer((req, res) => {
  handle(req, res).catch((e) => {
    if (!res.headersSent) jsonError(res, 500, String(e?.message ?? e));
    else res.end();
  });
});

httpServer.listen(parsePort(process.argv), '127.0.0.1', () => {
  const { port } = httpServer.address();
  console.log(`listening on http://127.0.0.1:${port}/mcp`);
});

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    httpServer.close();
    process.exit(0);
  });
}
