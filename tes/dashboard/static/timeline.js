// The task's timeline: one row per step (the volume, the inputs filer, each
// executor, the outputs filer) on a time axis; a bar from the step's
// creation to its end, hatched while it waited for its container, filled
// while it ran. Plain SVG, drawn from GET /tasks/{id}/events.
'use strict';
window.Timeline = (function () {
  const NS = 'http://www.w3.org/2000/svg';
  const W = 960, LABEL = 150, RIGHT = 70, ROW = 28, TOP = 30, BAR = 16;

  function el(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function ms(iso) {
    if (!iso) return NaN;
    return Date.parse(iso);
  }

  function label(step) {
    switch (step.kind) {
      case 'volume': return 'volume';
      case 'inputs': return 'inputs filer';
      case 'outputs': return 'outputs filer';
      case 'executor': return 'executor ' + (step.executor !== undefined ? step.executor : step.part);
    }
    return step.part;
  }

  function duration(s) {
    if (!isFinite(s)) return '';
    if (s < 1) return Math.round(s * 1000) + ' ms';
    if (s < 60) return (Math.round(s * 10) / 10) + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + Math.round(s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.round((s % 3600) / 60) + ' min';
  }

  // A tick step that gives about six ticks over span seconds.
  function tickStep(span) {
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400];
    for (const s of steps) if (span / s <= 7) return s;
    return steps[steps.length - 1];
  }

  function tickLabel(s) {
    if (s === 0) return '0';
    if (s < 60) return '+' + s + ' s';
    if (s < 3600) return '+' + (s / 60) + ' min';
    return '+' + (s / 3600) + ' h';
  }

  // render returns the SVG of the steps; now is the service's clock (the
  // end of the bars still running).
  function render(steps, nowISO) {
    const now = ms(nowISO) || Date.now();
    const drawn = steps.filter(s => s.created);
    let t0 = Infinity, t1 = -Infinity;
    for (const s of drawn) {
      t0 = Math.min(t0, ms(s.created));
      const end = s.ended ? ms(s.ended) : now;
      t1 = Math.max(t1, end, ms(s.started) || -Infinity);
    }
    if (!isFinite(t0)) { t0 = now; t1 = now + 1000; }
    if (t1 - t0 < 1000) t1 = t0 + 1000;
    const span = (t1 - t0) / 1000;
    const step = tickStep(span);
    const axisEnd = Math.max(span, step);
    const x = t => LABEL + (W - LABEL - RIGHT) * ((t - t0) / 1000) / axisEnd;
    const H = TOP + ROW * steps.length + 10;
    const svg = el('svg', { class: 'timeline', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Timeline of the task\'s steps' });
    const defs = el('defs');
    const pat = el('pattern', { id: 'tl-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
    pat.appendChild(el('rect', { width: 6, height: 6, fill: '#ffffff' }));
    pat.appendChild(el('rect', { width: 3, height: 6, fill: '#c9d1dc' }));
    defs.appendChild(pat);
    svg.appendChild(defs);

    // The axis: seconds since the first step's creation.
    for (let s = 0; s <= axisEnd + 1e-9; s += step) {
      const xx = x(t0 + s * 1000);
      svg.appendChild(el('line', { class: 'grid', x1: xx, x2: xx, y1: TOP - 6, y2: H - 6 }));
      svg.appendChild(el('text', { class: 'axis', x: xx, y: TOP - 12, 'text-anchor': 'middle' }, tickLabel(s)));
    }
    svg.appendChild(el('text', { class: 'axis', x: 6, y: TOP - 12 }, new Date(t0).toLocaleTimeString()));

    steps.forEach((s, i) => {
      const y = TOP + i * ROW;
      const g = el('g', {
        class: 'bar st-' + s.status + (s.kind === 'volume' ? ' st-volume' : ''),
        'data-part': s.part, 'data-kind': s.kind, 'data-status': s.status,
        'data-start': s.created ? ms(s.created) : '', 'data-end': s.ended ? ms(s.ended) : '',
      });
      g.appendChild(el('text', { x: 6, y: y + BAR - 3 }, label(s)));
      if (!s.created) {
        g.appendChild(el('text', { class: 'status', x: LABEL, y: y + BAR - 3 }, s.status === 'skipped' ? 'skipped: the task ended before' : 'not started yet'));
        svg.appendChild(g);
        return;
      }
      const c = ms(s.created), st = ms(s.started), e = s.ended ? ms(s.ended) : now;
      const waitEnd = isFinite(st) ? st : e;
      const tip = [label(s) + ' (' + s.name + '): ' + s.status];
      if (waitEnd > c) {
        g.appendChild(el('rect', { class: 'wait', x: x(c), y: y, width: Math.max(1, x(waitEnd) - x(c)), height: BAR, rx: 2 }));
        if (s.kind !== 'volume') tip.push('waited ' + duration((waitEnd - c) / 1000));
      }
      if (isFinite(st)) {
        g.appendChild(el('rect', { class: 'run', x: x(st), y: y, width: Math.max(2, x(e) - x(st)), height: BAR, rx: 2 }));
        tip.push((s.ended ? 'ran ' : 'running for ') + duration((e - st) / 1000));
      } else if (!s.ended) {
        tip.push('waiting for its container');
      }
      if (s.exit_code !== undefined) tip.push('exit code ' + s.exit_code);
      if (s.reason) tip.push(s.reason);
      g.appendChild(el('title', {}, tip.join(', ')));
      const right = Math.max(x(e), x(c)) + 6;
      let note = s.status;
      if (s.exit_code !== undefined && s.exit_code !== 0) note += ' (' + s.exit_code + ')';
      if (right < W - 4) g.appendChild(el('text', { class: 'status', x: right, y: y + BAR - 3 }, note));
      svg.appendChild(g);
    });
    const running = steps.some(s => s.created && !s.ended);
    if (running) {
      const xx = x(now);
      svg.appendChild(el('line', { class: 'now', x1: xx, x2: xx, y1: TOP - 6, y2: H - 6 }));
    }
    return svg;
  }

  return { render: render, duration: duration, label: label };
})();
