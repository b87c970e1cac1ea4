import { render } from 'preact';
import { App, prefetchPage } from './app.tsx';
import { firstSession } from './session.tsx';
import './styles.css';

// Both at once, before rendering: the session and the module of the page asked for.
void firstSession().catch(() => {});
prefetchPage(location.pathname);

const root = document.getElementById('app');
if (root) {
  root.textContent = '';
  render(<App />, root);
}
