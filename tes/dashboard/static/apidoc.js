// The API's OpenAPI document, made browsable: its operations by tag, each
// with its parameters, request body and answers, and its schemas with their
// fields. Drawn from GET /ga4gh/tes/v1/openapi.json, nothing else.
'use strict';
window.APIDoc = (function () {
  function h(tag, attrs) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), attrs[k]);
      else e.setAttribute(k, attrs[k]);
    }
    for (let i = 2; i < arguments.length; i++) {
      const c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return e;
  }

  // Inline text with `code` spans.
  function inline(text) {
    const span = h('span');
    String(text).split('`').forEach((part, i) => {
      if (part) span.appendChild(i % 2 ? h('code', { text: part }) : document.createTextNode(part));
    });
    return span;
  }

  // A little Markdown: paragraphs, "- " lists, ``` blocks, `code`.
  function prose(text) {
    const div = h('div', { class: 'prose' });
    if (!text) return div;
    const lines = String(text).split('\n');
    let para = [], list = null, block = null;
    const flush = () => {
      if (para.length) { div.appendChild(h('p', {}, inline(para.join(' ')))); para = []; }
    };
    for (const line of lines) {
      if (block !== null) {
        if (line.trim().startsWith('```')) { div.appendChild(h('pre', { text: block.join('\n') })); block = null; }
        else block.push(line);
        continue;
      }
      if (line.trim().startsWith('```')) { flush(); list = null; block = []; continue; }
      const m = /^\s*[-*] (.*)$/.exec(line);
      if (m) {
        flush();
        if (!list) { list = h('ul'); div.appendChild(list); }
        list.appendChild(h('li', {}, inline(m[1])));
        continue;
      }
      if (!line.trim()) { flush(); list = null; continue; }
      if (list && /^\s+/.test(line)) { list.lastChild.appendChild(document.createTextNode(' ')); list.lastChild.appendChild(inline(line.trim())); continue; }
      list = null;
      para.push(line.trim());
    }
    flush();
    return div;
  }

  function refName(ref) { return ref.split('/').pop(); }

  function goTo(name) {
    return ev => {
      ev.preventDefault();
      const t = document.getElementById('schema-' + name);
      if (t) t.scrollIntoView({ behavior: 'smooth', block: 'start' });
    };
  }

  // A schema's type, with links to the schemas it refers to.
  function typeOf(s) {
    if (!s) return h('span', { text: 'any' });
    if (s.$ref) { const n = refName(s.$ref); return h('a', { href: '#/api', class: 'mono', 'data-ref': n, onclick: goTo(n) }, n); }
    if (s.allOf) {
      const span = h('span');
      s.allOf.forEach((p, i) => { if (i) span.appendChild(document.createTextNode(' & ')); span.appendChild(typeOf(p)); });
      return span;
    }
    if (s.type === 'array') return h('span', {}, 'array of ', typeOf(s.items));
    if (s.type === 'object' && s.additionalProperties && typeof s.additionalProperties === 'object') return h('span', {}, 'map of ', typeOf(s.additionalProperties));
    let t = s.type || 'object';
    if (s.format) t += ' (' + s.format + ')';
    const span = h('span', { class: 'mono', text: t });
    if (s.enum) span.appendChild(document.createTextNode(': ' + s.enum.join(', ')));
    return span;
  }

  function schemaTable(s) {
    const props = s.properties || {};
    const req = new Set(s.required || []);
    if (!Object.keys(props).length) return null;
    const body = h('tbody');
    for (const name of Object.keys(props)) {
      const p = props[name];
      body.appendChild(h('tr', {},
        h('td', {}, h('code', { text: name })),
        h('td', {}, typeOf(p)),
        h('td', { class: 'req', text: req.has(name) ? 'required' : '' }),
        h('td', {}, prose(p.description || ''))));
    }
    return h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'field' }), h('th', { text: 'type' }), h('th'), h('th', { text: 'description' }))), body);
  }

  function resolve(doc, o) {
    if (o && o.$ref) {
      const path = o.$ref.replace(/^#\//, '').split('/');
      let v = doc;
      for (const p of path) v = v && v[p];
      return v || {};
    }
    return o || {};
  }

  function operation(doc, path, method, op) {
    const secure = op.security ? op.security.length > 0 : (doc.security || []).length > 0;
    const ext = (op.tags || []).includes('TeskExtensions');
    const summary = h('summary', {},
      h('span', { class: 'method m-' + method, text: method.toUpperCase() }),
      h('code', { text: path }),
      h('span', { text: op.summary || '' }),
      ext ? h('span', { class: 'ext', text: 'not TES: this service\'s' }) : null,
      secure ? null : h('span', { class: 'muted', text: 'no token needed' }));
    const body = h('div', {}, prose(op.description || ''));
    const params = (op.parameters || []).map(p => resolve(doc, p));
    if (params.length) {
      const tb = h('tbody');
      for (const p of params) {
        tb.appendChild(h('tr', {}, h('td', {}, h('code', { text: p.name })), h('td', { text: p.in }), h('td', {}, typeOf(p.schema)),
          h('td', { class: 'req', text: p.required ? 'required' : '' }), h('td', {}, prose(p.description || ''))));
      }
      body.appendChild(h('h4', { text: 'Parameters' }));
      body.appendChild(h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'name' }), h('th', { text: 'in' }), h('th', { text: 'type' }), h('th'), h('th', { text: 'description' }))), tb));
    }
    if (op.requestBody) {
      const rb = resolve(doc, op.requestBody);
      const media = (rb.content || {})['application/json'] || {};
      body.appendChild(h('h4', { text: 'Request body' }));
      body.appendChild(h('p', {}, 'application/json: ', typeOf(media.schema)));
    }
    const tb = h('tbody');
    for (const code of Object.keys(op.responses || {})) {
      const r = resolve(doc, op.responses[code]);
      const media = (r.content || {})['application/json'] || {};
      tb.appendChild(h('tr', {}, h('td', {}, h('code', { text: code })), h('td', {}, prose(r.description || '')), h('td', {}, media.schema ? typeOf(media.schema) : '')));
    }
    body.appendChild(h('h4', { text: 'Answers' }));
    body.appendChild(h('table', {}, h('thead', {}, h('tr', {}, h('th', { text: 'status' }), h('th', { text: 'meaning' }), h('th', { text: 'body' }))), tb));
    return h('details', { class: 'op', id: 'op-' + (op.operationId || method + path), 'data-op': op.operationId || '' }, summary, body);
  }

  function render(doc) {
    const root = h('div', { class: 'apidoc' });
    const info = doc.info || {};
    root.appendChild(h('div', { class: 'taskhead' }, h('h1', { text: info.title || 'API' }), h('span', { class: 'state', text: 'version ' + (info.version || '?') }),
      h('span', { class: 'grow' }), h('a', { href: '../ga4gh/tes/v1/openapi.json', text: 'openapi.json' })));
    const base = (doc.servers || [])[0];
    if (base) root.appendChild(h('p', { class: 'muted' }, 'Base path: ', h('code', { text: base.url })));
    root.appendChild(h('div', { class: 'card' }, prose(info.description || '')));
    const byTag = {};
    const methods = ['get', 'post', 'put', 'patch', 'delete'];
    for (const path of Object.keys(doc.paths || {})) {
      for (const m of methods) {
        const op = doc.paths[path][m];
        if (!op) continue;
        const tag = (op.tags || ['other'])[0];
        (byTag[tag] = byTag[tag] || []).push(operation(doc, path, m, op));
      }
    }
    const tagInfo = {};
    for (const t of doc.tags || []) tagInfo[t.name] = t.description;
    for (const tag of Object.keys(byTag)) {
      root.appendChild(h('h2', {}, tag, tagInfo[tag] ? h('span', { class: 'muted', text: ' · ' + tagInfo[tag] }) : null));
      byTag[tag].forEach(o => root.appendChild(o));
    }
    root.appendChild(h('h2', { text: 'Schemas' }));
    const schemas = (doc.components || {}).schemas || {};
    for (const name of Object.keys(schemas).sort()) {
      const s = schemas[name];
      const sec = h('section', { class: 'schema card', id: 'schema-' + name }, h('h3', { text: name }), prose(s.description || ''));
      if (s.allOf) sec.appendChild(h('p', {}, 'All of: ', typeOf(s)));
      if (s.enum) sec.appendChild(h('p', {}, typeOf(s)));
      if (s.allOf) for (const p of s.allOf) if (p.required) sec.appendChild(h('p', {}, 'Required: ', h('code', { text: p.required.join(', ') })));
      const t = schemaTable(s);
      if (t) sec.appendChild(t);
      root.appendChild(sec);
    }
    return root;
  }

  return { render: render };
})();
