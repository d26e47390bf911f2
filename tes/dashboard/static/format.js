// The dashboard's formats of times, ages and sizes, in the user's time
// zone.
'use strict';
window.Format = (function () {
  function time(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (isNaN(d)) return iso;
    const p = n => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }
  function ago(iso) {
    const t = Date.parse(iso);
    if (isNaN(t)) return '';
    const s = Math.round((Date.now() - t) / 1000);
    if (s < 5) return 'just now';
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return Math.round(s / 3600) + ' h ago';
    return Math.round(s / 86400) + ' d ago';
  }
  function bytes(n) {
    n = Number(n);
    if (!isFinite(n)) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
  }
  // between is the time from a to b (ISO times), as Timeline says a
  // duration.
  function between(a, b) {
    const s = (Date.parse(b) - Date.parse(a)) / 1000;
    return isFinite(s) ? Timeline.duration(s) : '';
  }

  return { time: time, ago: ago, bytes: bytes, between: between };
})();
