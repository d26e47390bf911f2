// The dashboard: the task list, a task's page and the API's document, from
// the TES API with the user's credentials (auth.js: a bearer token, or a
// user name and password the page asks for), or none when the service runs
// without access control. Every failure shows a message.
'use strict';
(function () {
  const FINAL = ['COMPLETE', 'EXECUTOR_ERROR', 'SYSTEM_ERROR', 'CANCELED', 'PREEMPTED'];
  const STATES = ['QUEUED', 'INITIALIZING', 'RUNNING', 'PAUSED', 'COMPLETE', 'EXECUTOR_ERROR', 'SYSTEM_ERROR', 'CANCELING', 'CANCELED', 'PREEMPTED', 'UNKNOWN'];
  const S = { cfg: null, timer: null, gen: 0, pages: [''], pageIndex: 0, refresh: 10 };
  window.teskTimings = {};

  // ---- DOM

  function h(tag, attrs) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (let i = 2; i < arguments.length; i++) append(e, arguments[i]);
    return e;
  }
  function append(e, c) {
    if (c === null || c === undefined || c === false) return;
    if (Array.isArray(c)) { c.forEach(x => append(e, x)); return; }
    e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  function $(id) { return document.getElementById(id); }
  function setMain(view, ...kids) {
    const m = $('main');
    m.replaceChildren(...kids.filter(Boolean));
    m.dataset.view = view;
    document.body.dataset.view = view;
    for (const a of document.querySelectorAll('.nav a')) a.classList.toggle('active', a.id === 'nav-' + (view === 'api' ? 'api' : 'tasks'));
  }
  function stateBadge(state) { return h('span', { class: 'state s-' + (state || 'UNKNOWN'), 'data-state': state || '' }, state || 'UNKNOWN'); }

  // ---- formats (format.js)

  const { time: fmtTime, ago, bytes: fmtBytes, between } = Format;
  function timeCell(iso) { return iso ? h('span', { title: iso }, fmtTime(iso), h('span', { class: 'muted' }, ' · ' + ago(iso))) : h('span', { class: 'muted' }, '—'); }

  // ---- dialogs

  function modal(...kids) {
    const m = $('modal');
    m.replaceChildren(h('div', { class: 'dialog', role: 'dialog', 'aria-modal': 'true' }, ...kids));
    m.hidden = false;
    return () => { m.hidden = true; m.replaceChildren(); };
  }

  // ---- the API

  class APIError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function api(method, path, body) {
    // X-Requested-With marks the page's requests (of the API's own origin):
    // the API's 401 to them has no Basic challenge, so the browser neither
    // asks for a password nor keeps one; credentials: 'omit' sends none the
    // browser holds.
    const headers = Object.assign({ Accept: 'application/json', 'X-Requested-With': 'XMLHttpRequest' }, Auth.headers());
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let r;
    try {
      r = await fetch(S.cfg.api + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new APIError(0, 'Cannot reach the TES API (' + e.message + ').');
    }
    const text = await r.text();
    let data = null;
    try { data = JSON.parse(text); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new APIError(r.status, (data && data.error) || text.trim() || r.statusText);
    if (data === null) throw new APIError(r.status, 'The TES API answered something that is not JSON.');
    return data;
  }

  // problem is a message box; actions are [label, handler, id] triples.
  function problem(title, message, actions, status) {
    return h('div', { class: 'error', 'data-status': status === undefined ? '' : status },
      h('h3', {}, title), h('p', {}, message),
      actions && actions.length ? h('div', { class: 'actions' }, actions.map(a => h('button', { onclick: a[1], id: a[2] }, a[0]))) : null);
  }

  // explain turns a failed request into a message that says what to do.
  function explain(err, what) {
    const st = err.status;
    if (st === 401) return Auth.unauthorized(err);
    if (st === 403) return problem('Not yours', 'The TES API refused: ' + err.message + '. A user sees only their own tasks.', null, 403);
    if (st === 404 && what && what.task) {
      return h('div', { class: 'error', 'data-status': 404, id: 'gone' },
        h('h3', {}, 'Task ' + what.task + ' is gone'),
        h('p', {}, 'There is no such task: it never existed, or it ended and its time to live ran out, which deletes it with everything it made. (' + err.message + ')'),
        h('div', { class: 'actions' }, h('button', { onclick: () => { location.hash = '#/'; } }, 'Back to the tasks')));
    }
    if (st === 0) return problem('The TES API cannot be reached', err.message + ' The page tries again.', null, 0);
    if (st === 429 || st === 503) return problem('The cluster is busy', 'The TES API answered ' + st + ': ' + err.message + '. The page tries again.', null, st);
    if (st === 400) return problem('The request was refused', err.message, null, 400);
    return problem('The TES API answered ' + (st || 'an error'), err.message || String(err), null, st);
  }

  function banner(node) {
    const b = $('banner');
    if (!node) { b.hidden = true; b.replaceChildren(); return; }
    b.replaceChildren(node);
    b.hidden = false;
  }

  // ---- routing

  function stop() {
    if (S.timer) clearTimeout(S.timer);
    S.timer = null;
    S.gen++;
  }

  function schedule(fn, seconds) {
    const gen = S.gen;
    if (S.timer) clearTimeout(S.timer);
    S.timer = setTimeout(() => { if (gen === S.gen) fn(); }, seconds * 1000);
  }

  function route() {
    stop();
    const hash = location.hash || '#/';
    const m = /^#\/tasks\/([^/?]+)/.exec(hash);
    if (m) return taskPage(decodeURIComponent(m[1]));
    if (hash.startsWith('#/api')) return apiPage();
    return listPage(new URLSearchParams(hash.replace(/^#\/?\??/, '')));
  }

  // ---- the list

  function listQuery(p) {
    const q = new URLSearchParams();
    q.set('view', 'BASIC');
    q.set('page_size', p.get('page_size') || '50');
    if (p.get('state')) q.set('state', p.get('state'));
    if (p.get('name_prefix')) q.set('name_prefix', p.get('name_prefix'));
    for (const tag of (p.get('tags') || '').split(/[\s,]+/).filter(Boolean)) {
      const i = tag.indexOf('=');
      q.append('tag_key', i < 0 ? tag : tag.slice(0, i));
      q.append('tag_value', i < 0 ? '' : tag.slice(i + 1));
    }
    return q;
  }

  function listPage(p) {
    const key = p.toString();
    if (S.listKey !== key) { S.listKey = key; S.pages = ['']; S.pageIndex = 0; }
    const select = (name, id, options, value) => h('select', { name, id }, options.map(o => {
      const [v, label] = Array.isArray(o) ? o : [o, o];
      return h('option', { value: v, selected: String(v) === String(value) }, label);
    }));
    const form = h('form', { class: 'filters', id: 'filters', onsubmit: ev => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      const q = new URLSearchParams();
      for (const k of ['state', 'name_prefix', 'tags', 'page_size']) if (f.get(k)) q.set(k, f.get(k));
      S.refresh = Number(f.get('refresh'));
      const next = '#/?' + q.toString();
      if (next === location.hash) route(); else location.hash = next;
    } },
    h('label', {}, 'State', select('state', 'f-state', [['', 'any']].concat(STATES), p.get('state') || '')),
    h('label', {}, 'Name starts with', h('input', { name: 'name_prefix', id: 'f-name', value: p.get('name_prefix') || '', placeholder: 'prefix' })),
    h('label', {}, 'Tags', h('input', { name: 'tags', id: 'f-tags', value: p.get('tags') || '', placeholder: 'key=value key2', size: 22 })),
    h('label', {}, 'Per page', select('page_size', 'f-size', ['25', '50', '100', '256'], p.get('page_size') || '50')),
    h('label', {}, 'Refresh', select('refresh', 'f-refresh', [['1', 'every 1 s'], ['2', 'every 2 s'], ['5', 'every 5 s'], ['10', 'every 10 s'], ['30', 'every 30 s'], ['60', 'every minute'], ['0', 'off']], S.refresh)),
    h('button', { class: 'primary', type: 'submit', id: 'f-apply' }, 'Apply'));
    form.querySelector('#f-refresh').addEventListener('change', ev => { S.refresh = Number(ev.target.value); stop(); loadList(p); });
    const status = h('div', { class: 'listinfo' }, h('span', { id: 'list-count' }, ''), h('span', { id: 'list-updated' }, ''));
    const rows = h('tbody', { id: 'rows' }, h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'Loading the tasks…')));
    const table = h('table', { class: 'tasks', id: 'tasks' },
      h('thead', {}, h('tr', {}, ['Task', 'Name', 'State', 'Created', 'Executors', 'Tags'].map(t => h('th', {}, t)))), rows);
    const pager = h('div', { class: 'pager' },
      h('button', { id: 'newer', disabled: true, onclick: () => { stop(); S.pageIndex--; loadList(p); } }, '← Newer'),
      h('span', { id: 'page-no', class: 'muted' }, ''),
      h('button', { id: 'older', disabled: true, onclick: () => { stop(); S.pageIndex++; loadList(p); } }, 'Older →'));
    setMain('list', form, h('div', { id: 'list-error' }), status, table, pager);
    document.title = 'Tasks · TESK on Knative';
    loadList(p);
  }

  async function loadList(p) {
    const gen = S.gen;
    const q = listQuery(p);
    const tokenOfPage = S.pages[S.pageIndex];
    if (tokenOfPage) q.set('page_token', tokenOfPage);
    let data;
    try {
      data = await api('GET', '/tasks?' + q.toString());
    } catch (err) {
      if (gen !== S.gen) return;
      $('list-error').replaceChildren(explain(err));
      if ($('rows').dataset.loaded === undefined) $('rows').replaceChildren(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No tasks to show.')));
      if (err.status !== 401 && err.status !== 403 && err.status !== 400 && S.refresh > 0) schedule(() => loadList(p), Math.max(S.refresh, 5));
      return;
    }
    if (gen !== S.gen) return;
    $('list-error').replaceChildren();
    const tasks = data.tasks || [];
    S.pages.length = S.pageIndex + 1;
    if (data.next_page_token) S.pages.push(data.next_page_token);
    const rows = tasks.map(t => h('tr', { 'data-id': t.id, 'data-state': t.state },
      h('td', {}, h('a', { href: '#/tasks/' + encodeURIComponent(t.id), class: 'mono' }, t.id)),
      h('td', {}, t.name || h('span', { class: 'muted' }, '—')),
      h('td', {}, stateBadge(t.state)),
      h('td', {}, timeCell(t.creation_time)),
      h('td', {}, String((t.executors || []).length)),
      h('td', {}, h('div', { class: 'tags' }, Object.keys(t.tags || {}).map(k => h('span', { class: 'tag' }, t.tags[k] ? k + '=' + t.tags[k] : k))))));
    const body = $('rows');
    body.replaceChildren(...(rows.length ? rows : [h('tr', { id: 'no-tasks' }, h('td', { colspan: 6, class: 'muted' }, data.next_page_token ? 'No task of this page matches these filters; a page looks at a bounded number of tasks, and older ones follow (Older →).' : p.toString() ? 'No task matches these filters.' : 'No tasks yet.'))]));
    body.dataset.loaded = '1';
    $('list-count').textContent = tasks.length + (tasks.length === 1 ? ' task' : ' tasks') + ' on this page';
    $('list-updated').textContent = 'updated ' + new Date().toLocaleTimeString() + (S.refresh > 0 ? ', again every ' + S.refresh + ' s' : '');
    $('newer').disabled = S.pageIndex === 0;
    $('older').disabled = !data.next_page_token;
    $('page-no').textContent = 'page ' + (S.pageIndex + 1);
    $('main').dataset.ready = 'list';
    if (window.teskTimings.listFirstRows === undefined) window.teskTimings.listFirstRows = performance.now();
    if (S.refresh > 0) schedule(() => loadList(p), S.refresh);
  }

  // ---- a task

  function taskPage(id) {
    setMain('task', h('p', { class: 'muted' }, 'Loading task ' + id + '…'));
    document.title = id + ' · TESK on Knative';
    loadTask(id);
  }

  async function loadTask(id) {
    const gen = S.gen;
    const enc = encodeURIComponent(id);
    const [tr, er] = await Promise.allSettled([api('GET', '/tasks/' + enc + '?view=FULL'), api('GET', '/tasks/' + enc + '/events')]);
    if (gen !== S.gen) return;
    if (tr.status === 'rejected') {
      const err = tr.reason;
      setMain('task', h('p', {}, h('a', { href: '#/' }, '← Tasks')), explain(err, { task: id }));
      $('main').dataset.ready = 'task-error';
      if (err.status === 0 || err.status === 429 || err.status === 503 || err.status >= 500) schedule(() => loadTask(id), 5);
      return;
    }
    const task = tr.value;
    const story = er.status === 'fulfilled' ? er.value : null;
    const open = {};
    for (const d of document.querySelectorAll('main details[id]')) open[d.id] = d.open;
    setMain('task', ...renderTask(task, story, er.status === 'rejected' ? er.reason : null));
    for (const id2 in open) { const d = $(id2); if (d) d.open = open[id2]; }
    for (const pre of document.querySelectorAll('pre.stdout')) pre.scrollTop = pre.scrollHeight;
    $('main').dataset.ready = 'task';
    if (!FINAL.includes(task.state)) schedule(() => loadTask(id), 3);
  }

  function renderTask(t, story, storyErr) {
    const log = (t.logs || [])[0] || { logs: [], outputs: [] };
    const final = FINAL.includes(t.state);
    const cancel = h('button', { class: 'danger', id: 'cancel', disabled: final || t.state === 'CANCELING', onclick: () => confirmCancel(t) }, 'Cancel task');
    const head = h('div', { class: 'taskhead' },
      h('h1', { id: 'task-title' }, t.name || t.id), stateBadge(t.state), h('span', { class: 'grow' }), cancel);
    const meta = h('dl', { class: 'meta' },
      h('dt', {}, 'Id'), h('dd', { class: 'mono', id: 'task-id' }, t.id),
      t.description ? [h('dt', {}, 'Description'), h('dd', {}, t.description)] : null,
      h('dt', {}, 'Created'), h('dd', {}, timeCell(t.creation_time)),
      log.start_time ? [h('dt', {}, 'Started'), h('dd', {}, timeCell(log.start_time))] : null,
      log.end_time ? [h('dt', {}, 'Ended'), h('dd', {}, timeCell(log.end_time), h('span', { class: 'muted' }, ' (took ' + between(t.creation_time, log.end_time) + ')'))] : null,
      Object.keys(t.tags || {}).length ? [h('dt', {}, 'Tags'), h('dd', {}, h('div', { class: 'tags' }, Object.keys(t.tags).map(k => h('span', { class: 'tag' }, k + '=' + t.tags[k]))))] : null);
    const out = [h('p', {}, h('a', { href: '#/' }, '← Tasks')), h('div', { class: 'card' }, head, meta)];

    // Why it stopped, first.
    const sys = log.system_logs || [];
    if (t.state === 'EXECUTOR_ERROR' || t.state === 'SYSTEM_ERROR' || t.state === 'CANCELED' || t.state === 'CANCELING' || (final && sys.length)) {
      const failed = (log.logs || []).map((l, i) => [l, i]).filter(([l]) => l.end_time && l.exit_code !== 0);
      const box = h('div', { class: 'reason' + (t.state.startsWith('CANCEL') ? ' cancelled' : ''), id: 'reason' },
        h('b', {}, t.state === 'EXECUTOR_ERROR' ? 'An executor failed' : t.state === 'SYSTEM_ERROR' ? 'The system stopped the task' : t.state === 'COMPLETE' ? 'Notes' : 'The task was cancelled'),
        failed.length && t.state === 'EXECUTOR_ERROR' ? h('p', {}, failed.map(([l, i]) => 'executor ' + i + ' exited with code ' + l.exit_code).join('; ') + '.') : null,
        sys.length ? h('pre', { id: 'system-logs' }, sys.join('\n')) : null);
      out.push(box);
    }

    out.push(h('h2', {}, 'Timeline'));
    if (story) {
      if ((story.steps || []).length) {
        out.push(Timeline.render(story.steps, story.server_time));
        out.push(h('div', { class: 'legend' }, h('span', { class: 'l-wait' }, 'waiting for its container'), h('span', {}, 'running'),
          h('span', { class: 'l-ok' }, 'succeeded'), h('span', { class: 'l-bad' }, 'failed'), h('span', { class: 'l-del' }, 'deleted'), h('span', { class: 'l-vol' }, 'volume')));
      } else {
        out.push(h('p', { class: 'muted', id: 'no-steps' }, final ? 'The task ended before any step started.' : 'No step has started yet: the task is queued.'));
      }
    } else if (storyErr) {
      out.push(explain(storyErr));
    }

    // Executors.
    out.push(h('h2', {}, 'Executors'));
    const steps = ((story && story.steps) || []).filter(s => s.kind === 'executor');
    (t.executors || []).forEach((ex, i) => {
      // An executor that runs has a log without an end time: its output so far.
      const entry = (log.logs || [])[i];
      const l = entry && entry.end_time ? entry : null;
      const live = entry && !entry.end_time ? entry : null;
      const st = steps.find(s => s.executor === i);
      const status = l ? (l.exit_code === 0 ? 'exited 0' : 'exited ' + l.exit_code) : st ? st.status : 'not started';
      const code = l ? h('span', { class: 'exit-code ' + (l.exit_code === 0 ? 'ok' : 'bad') }, 'exit code ' + l.exit_code) : h('span', { class: 'muted exit-code' }, status);
      const card = h('div', { class: 'card executor', 'data-index': i, 'data-exit-code': l ? l.exit_code : '' },
        h('div', { class: 'exhead' }, h('b', {}, 'Executor ' + i), h('code', {}, ex.image), code,
          l && l.start_time ? h('span', { class: 'muted' }, fmtTime(l.start_time) + (l.end_time ? ' → ' + fmtTime(l.end_time) + ' (' + between(l.start_time, l.end_time) + ')' : '')) : null,
          ex.ignore_error ? h('span', { class: 'tag' }, 'ignore_error') : null),
        h('div', { class: 'mono' }, '$ ' + (ex.command || []).map(w => /[\s'"]/.test(w) ? JSON.stringify(w) : w).join(' ')),
        ex.workdir || ex.stdin || ex.stdout || ex.stderr ? h('div', { class: 'muted' },
          [['workdir', ex.workdir], ['stdin', ex.stdin], ['stdout', ex.stdout], ['stderr', ex.stderr]].filter(x => x[1]).map(x => x[0] + ' ' + x[1]).join(' · ')) : null,
        Object.keys(ex.env || {}).length ? h('div', { class: 'tags' }, Object.keys(ex.env).map(k => h('span', { class: 'tag' }, k + '=' + ex.env[k]))) : null,
        l && l.stdout ? h('pre', { class: 'stdout' }, l.stdout) : l && !l.stderr ? h('p', { class: 'muted' }, 'No output.')
          : live && live.stdout ? [h('p', { class: 'muted' }, 'Its output so far:'), h('pre', { class: 'stdout' }, live.stdout)]
          : !l && st && (st.status === 'running' || st.status === 'waiting') ? h('p', { class: 'muted' }, 'Its output shows here as it runs.') : null,
        (l || live) && (l || live).stderr ? [h('p', { class: 'muted' }, 'stderr'), h('pre', { class: 'stdout stderr' }, (l || live).stderr)] : null);
      out.push(card);
    });

    // Inputs and outputs.
    if ((t.inputs || []).length) {
      out.push(h('h2', {}, 'Inputs'));
      out.push(h('table', { id: 'inputs' }, h('thead', {}, h('tr', {}, ['Name', 'Path', 'From', 'Type', 'Size'].map(x => h('th', {}, x)))),
        h('tbody', {}, t.inputs.map(inp => h('tr', {},
          h('td', {}, inp.name || ''), h('td', { class: 'mono' }, inp.path), h('td', { class: 'mono' }, inp.content !== undefined ? 'inline content' : (inp.url || '')),
          h('td', {}, inp.type || 'FILE'), h('td', {}, inp.content !== undefined ? fmtBytes(new TextEncoder().encode(inp.content).length) : h('span', { class: 'muted' }, 'not known')))))));
    }
    if ((t.outputs || []).length || (log.outputs || []).length) {
      out.push(h('h2', {}, 'Outputs'));
      if ((t.outputs || []).length) {
        out.push(h('table', { id: 'outputs' }, h('thead', {}, h('tr', {}, ['Name', 'Path', 'To', 'Type'].map(x => h('th', {}, x)))),
          h('tbody', {}, t.outputs.map(o => h('tr', {}, h('td', {}, o.name || ''), h('td', { class: 'mono' }, o.path + (o.path_prefix ? ' (prefix ' + o.path_prefix + ')' : '')),
            h('td', { class: 'mono' }, o.url), h('td', {}, o.type || 'FILE'))))));
      }
      out.push(h('h3', {}, 'Uploaded files'));
      out.push((log.outputs || []).length
        ? h('table', { id: 'uploaded' }, h('thead', {}, h('tr', {}, ['URL', 'Path', 'Size'].map(x => h('th', {}, x)))),
          h('tbody', {}, log.outputs.map(o => h('tr', {}, h('td', { class: 'mono' }, o.url), h('td', { class: 'mono' }, o.path), h('td', { title: o.size_bytes + ' bytes' }, fmtBytes(o.size_bytes))))))
        : h('p', { class: 'muted' }, final ? 'None.' : 'None yet: the outputs filer uploads them at the end.'));
    }
    const r = t.resources || {};
    if (Object.keys(r).length || (t.volumes || []).length) {
      out.push(h('h2', {}, 'Resources'));
      out.push(h('dl', { class: 'meta card' },
        r.cpu_cores ? [h('dt', {}, 'CPU cores'), h('dd', {}, String(r.cpu_cores))] : null,
        r.ram_gb ? [h('dt', {}, 'RAM'), h('dd', {}, r.ram_gb + ' GB')] : null,
        r.disk_gb ? [h('dt', {}, 'Disk'), h('dd', {}, r.disk_gb + ' GB')] : null,
        r.preemptible ? [h('dt', {}, 'Preemptible'), h('dd', {}, 'yes')] : null,
        (r.zones || []).length ? [h('dt', {}, 'Zones'), h('dd', {}, r.zones.join(', '))] : null,
        (t.volumes || []).length ? [h('dt', {}, 'Volumes'), h('dd', { class: 'mono' }, t.volumes.join(', '))] : null));
    }

    // Events.
    out.push(h('h2', {}, 'Events'));
    if (story) {
      const evs = story.events || [];
      out.push(evs.length ? h('table', { id: 'events' }, h('thead', {}, h('tr', {}, ['Time', 'Type', 'Reason', 'Object', 'Message'].map(x => h('th', {}, x)))),
        h('tbody', {}, evs.map(e => h('tr', { class: e.type === 'Warning' ? 'warning' : '', 'data-reason': e.reason },
          h('td', { title: e.time }, fmtTime(e.time)), h('td', {}, e.type), h('td', {}, e.reason + (e.count ? ' ×' + e.count : '')),
          h('td', { class: 'mono' }, e.object), h('td', {}, e.message)))))
        : h('p', { class: 'muted' }, 'No Events (the cluster keeps them for an hour).'));
    } else if (storyErr) {
      out.push(h('p', { class: 'muted' }, 'The Events could not be read (see above).'));
    }
    out.push(h('details', { id: 'raw' }, h('summary', {}, 'The task as JSON (FULL view)'), h('pre', { class: 'json' }, JSON.stringify(t, null, 2))));
    return out;
  }

  function confirmCancel(t) {
    const close = modal(
      h('h3', {}, 'Cancel ' + (t.name ? t.name + ' (' + t.id + ')' : t.id) + '?'),
      h('p', {}, 'Its running step is stopped and its jobs are deleted; it ends CANCELED. This cannot be undone.'),
      h('div', { class: 'actions' },
        h('button', { id: 'cancel-no', onclick: () => close() }, 'Keep it running'),
        h('button', { class: 'danger', id: 'cancel-yes', onclick: async () => {
          close();
          try {
            await api('POST', '/tasks/' + encodeURIComponent(t.id) + ':cancel');
            banner(h('div', { class: 'notice', id: 'cancel-requested' }, h('p', {}, 'Cancel requested for ' + t.id + '.')));
            setTimeout(() => banner(null), 4000);
          } catch (err) {
            banner(explain(err, { task: t.id }));
          }
          stop();
          loadTask(t.id);
        } }, 'Cancel the task')));
    $('cancel-no').focus();
  }

  // ---- the API's document

  async function apiPage() {
    setMain('api', h('p', { class: 'muted' }, 'Loading the OpenAPI document…'));
    document.title = 'API · TESK on Knative';
    try {
      const doc = await api('GET', '/openapi.json');
      setMain('api', APIDoc.render(doc));
      $('main').dataset.ready = 'api';
    } catch (err) {
      setMain('api', explain(err));
    }
  }

  // ---- start

  async function start() {
    window.addEventListener('error', e => banner(problem('The page failed', String(e.message || e.error))));
    window.addEventListener('unhandledrejection', e => banner(problem('The page failed', String((e.reason && e.reason.message) || e.reason))));
    try {
      const r = await fetch('config.json', { cache: 'no-store' });
      if (!r.ok) throw new Error('config.json answered ' + r.status);
      S.cfg = await r.json();
    } catch (e) {
      setMain('error', problem('The dashboard cannot start', 'Its configuration did not load: ' + e.message));
      return;
    }
    Auth.init({ cfg: S.cfg, h, $, modal, problem, banner, route });
    try {
      await Auth.finishLogin();
    } catch (e) {
      banner(problem('The login did not complete', e.message, [['Log in again', Auth.login, 'login-again']]));
    }
    Auth.render();
    setInterval(Auth.render, 30000);
    api('GET', '/service-info').then(info => { $('service').textContent = info.name; $('service').title = 'version ' + info.version + (info.environment ? ', ' + info.environment : ''); }, () => {});
    window.addEventListener('hashchange', route);
    route();
  }

  start();
})();
