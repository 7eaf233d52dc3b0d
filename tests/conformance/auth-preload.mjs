// Preloaded into the conformance suite's node process by run.sh (`node --import`) when a bearer
// token is given. The suite's server mode has no option for extra HTTP headers, so this adds
// `Authorization` to every request it sends to the server under test, at the three places the
// suite (0.2.0-alpha.12) sends from:
//   - global fetch and the npm `undici` package's request(): both go through undici's global
//     dispatcher (shared through a globalThis symbol), wrapped here with an interceptor;
//   - node:http request()/get() (used by http-header-validation for raw header control).
// Only requests whose connection target (not the Host header, which dns-rebinding-protection
// forges) is CONFORMANCE_AUTH_ORIGIN get the header, and a request that already carries an
// Authorization header keeps its own.
//
// Environment (set by run.sh, never printed):
//   CONFORMANCE_AUTHORIZATION  full header value, e.g. "Bearer abc..."
//   CONFORMANCE_AUTH_ORIGIN    origin of the MCP URL, e.g. "http://127.0.0.1:41234"
//   CONFORMANCE_PKG_DIR        directory of the installed @modelcontextprotocol/conformance package
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';

const authorization = process.env.CONFORMANCE_AUTHORIZATION;
const originEnv = process.env.CONFORMANCE_AUTH_ORIGIN;
const pkgDir = process.env.CONFORMANCE_PKG_DIR;

if (authorization && originEnv && pkgDir) {
  const target = new URL(originEnv);
  const defaultPort = target.protocol === 'https:' ? '443' : '80';
  const targetHost = target.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const targetPort = target.port || defaultPort;

  const matches = (hostname, port) =>
    String(hostname ?? '').replace(/^\[|\]$/g, '').toLowerCase() === targetHost &&
    String(port || defaultPort) === targetPort;

  // --- undici global dispatcher (fetch + undici.request) -------------------------------------
  const require = createRequire(path.join(pkgDir, 'package.json'));
  const undici = require('undici');

  const hasAuth = (headers) => {
    if (!headers) return false;
    if (Array.isArray(headers)) {
      if (headers.length > 0 && Array.isArray(headers[0])) {
        return headers.some(([k]) => String(k).toLowerCase() === 'authorization');
      }
      for (let i = 0; i < headers.length; i += 2) {
        if (String(headers[i]).toLowerCase() === 'authorization') return true;
      }
      return false;
    }
    if (typeof headers[Symbol.iterator] === 'function' && typeof headers !== 'string') {
      for (const [k] of headers) if (String(k).toLowerCase() === 'authorization') return true;
      return false;
    }
    return Object.keys(headers).some((k) => k.toLowerCase() === 'authorization');
  };

  const withAuth = (headers) => {
    if (hasAuth(headers)) return headers;
    if (!headers) return { authorization };
    if (Array.isArray(headers)) {
      if (headers.length > 0 && Array.isArray(headers[0])) return [...headers, ['authorization', authorization]];
      return [...headers, 'authorization', authorization];
    }
    if (typeof headers[Symbol.iterator] === 'function' && typeof headers !== 'string') {
      return [...headers, ['authorization', authorization]];
    }
    return { ...headers, authorization };
  };

  const interceptor = (dispatch) => (opts, handler) => {
    try {
      const o = new URL(String(opts.origin));
      if (matches(o.hostname, o.port)) {
        return dispatch({ ...opts, headers: withAuth(opts.headers) }, handler);
      }
    } catch {
      // not a URL we can read: leave the request alone
    }
    return dispatch(opts, handler);
  };
  undici.setGlobalDispatcher(undici.getGlobalDispatcher().compose(interceptor));

  // --- node:http ----------------------------------------------------------------------------
  const patch = (orig) =>
    function patched(...args) {
      let [a, b] = args;
      let opts;
      let url;
      if (typeof a === 'string' || a instanceof URL) {
        url = new URL(String(a));
        opts = b && typeof b === 'object' ? b : undefined;
      } else {
        opts = a;
      }
      const hostname = opts?.hostname ?? opts?.host?.replace(/:\d+$/, '') ?? url?.hostname ?? 'localhost';
      const port = opts?.port ?? url?.port;
      if (matches(hostname, port)) {
        const headers = opts?.headers ?? {};
        if (!hasAuth(headers)) {
          const patchedOpts = { ...(opts ?? {}), headers: withAuth(headers) };
          if (url) {
            args = opts ? [a, patchedOpts, ...args.slice(2)] : [a, patchedOpts, ...args.slice(1)];
          } else {
            args = [patchedOpts, ...args.slice(1)];
          }
        }
      }
      return orig.apply(this, args);
    };
  const origRequest = http.request;
  http.request = patch(origRequest);
  http.get = function get(...args) {
    const req = http.request(...args);
    req.end();
    return req;
  };
}
