// The login page: exchanges the one-time code in the URL fragment for the session cookie and
// the session's token, keeps the token in this origin's localStorage (never a cookie: cookies
// are not separated by port, localStorage is), then replaces this history entry with the
// dashboard (the code never stays in history).
import { storeToken } from './rpc.js';

const status = document.getElementById('login-status');
const params = new URLSearchParams(location.hash.slice(1));
const code = params.get('code');
// Forget the fragment at once, whatever happens next.
history.replaceState(null, '', '/ui/login');
if (!code) {
  status.textContent = 'No login code in this link. Run `openphone dashboard` to get one.';
} else {
  fetch('/ui/login', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ code }),
    credentials: 'same-origin',
  }).then(async (r) => {
    if (r.ok) {
      const { token } = await r.json();
      if (typeof token !== 'string' || !token) throw new Error('the daemon sent no session token');
      storeToken(token);
      status.textContent = 'Logged in. Opening the dashboard…';
      location.replace('/ui/');
    } else {
      status.textContent = `Login refused: ${await r.text()}`;
    }
  }).catch((e) => {
    status.textContent = `Login failed: ${e}`;
  });
}
