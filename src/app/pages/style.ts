/** `GET /assets/style.css`: the docs page's and the dashboard's one stylesheet. */
export const STYLE_CSS = `:root { color-scheme: light dark; --fg: #1d232a; --muted: #5b6670; --bg: #fff; --panel: #f4f6f8;
  --line: #d9dee3; --accent: #1f6feb; --ok: #1a7f37; --warn: #9a6700; --bad: #cf222e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9aa6b2; --bg: #0d1117; --panel: #161b22;
  --line: #30363d; --accent: #4493f8; --ok: #3fb950; --warn: #d29922; --bad: #f85149; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: baseline; justify-content: space-between; gap: 1rem; padding: .75rem 1.5rem;
  border-bottom: 1px solid var(--line); background: var(--panel); }
h1 { margin: 0; font-size: 1.3rem; } h1 small { color: var(--muted); font-weight: normal; font-size: .9rem; }
h2 { font-size: 1.15rem; margin: 1.75rem 0 .5rem; } h3 { font-size: 1rem; margin: 0 0 .25rem; }
h4 { font-size: .9rem; margin: 1rem 0 .25rem; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
h5 { margin: 0; font-size: .95rem; }
a { color: var(--accent); } .links a, .links button { margin-left: .75rem; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85em; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem; overflow: auto; }
table { border-collapse: collapse; width: 100%; margin: .25rem 0 .75rem; }
th, td { text-align: left; vertical-align: top; padding: .35rem .6rem; border-bottom: 1px solid var(--line); }
th { font-size: .8rem; color: var(--muted); font-weight: 600; }
td p { margin: 0; }
button { font: inherit; padding: .3rem .8rem; border-radius: 6px; border: 1px solid var(--line); background: var(--panel);
  color: var(--fg); cursor: pointer; }
button:hover { border-color: var(--accent); } button.danger:hover { border-color: var(--bad); color: var(--bad); }
input[type=password] { font: inherit; padding: .35rem .5rem; border: 1px solid var(--line); border-radius: 6px;
  background: var(--bg); color: var(--fg); width: 24rem; max-width: 100%; }
.method { display: inline-block; min-width: 3.6rem; text-align: center; font-size: .75rem; font-weight: 700;
  padding: .05rem .35rem; border-radius: 4px; color: #fff; background: var(--muted); }
.method.get { background: var(--ok); } .method.post { background: var(--accent); } .method.delete { background: var(--bad); }
.docs { display: grid; grid-template-columns: 19rem 1fr; }
.docs aside { border-right: 1px solid var(--line); padding: 1rem; position: sticky; top: 0; align-self: start;
  max-height: 100vh; overflow: auto; }
.docs main { padding: 0 2rem 3rem; max-width: 60rem; }
.toc, .toc ul { list-style: none; padding-left: 0; margin: 0; } .toc > li { margin-bottom: .75rem; font-weight: 600; }
.toc ul li { font-weight: normal; font-size: .85rem; margin: .2rem 0; } .toc a { text-decoration: none; color: var(--fg); }
.op { border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem; margin: 1rem 0; }
.op .summary { margin: 0 0 .5rem; font-weight: 600; } .auth { color: var(--muted); font-size: .85rem; }
.response { border-left: 3px solid var(--ok); padding: .1rem .8rem; margin: .5rem 0; }
.response.failure { border-color: var(--warn); } .response p { margin: .2rem 0; }
.dash { padding: 1rem 1.5rem 3rem; max-width: 72rem; }
.toolbar { display: flex; align-items: center; gap: 1rem; flex-wrap: wrap; color: var(--muted); }
.counters { display: grid; grid-template-columns: repeat(auto-fill, minmax(9rem, 1fr)); gap: .75rem; margin-top: 1rem; }
.counter { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; }
.counter .value { display: block; font-size: 1.9rem; font-weight: 700; font-variant-numeric: tabular-nums; }
.counter .label { color: var(--muted); font-size: .85rem; }
.counter[data-counter=dead_letters] .value:not([data-zero]) { color: var(--bad); }
.error { color: var(--bad); } .notice { color: var(--ok); } .empty { color: var(--muted); }
.flow { display: flex; gap: .75rem; align-items: center; margin: .5rem 0; }
.badge { border: 1px solid var(--warn); color: var(--warn); border-radius: 999px; padding: 0 .5rem; font-size: .85em; }
td:last-child button { margin: .1rem 0; } #dead-letters td:last-child { white-space: nowrap; }
.event { max-width: 28rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.state-in_flight { color: var(--accent); } .state-parked { color: var(--warn); }
#queues tbody tr { cursor: pointer; } #queues tr.chosen td { font-weight: 700; color: var(--accent); }
select { font: inherit; padding: .25rem .4rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
form.login { max-width: 36rem; margin: 3rem auto; padding: 1.5rem; border: 1px solid var(--line); border-radius: 8px; }
#groups tbody tr { cursor: pointer; } #groups tbody tr:hover td { background: var(--panel); }
.group-panel { border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; margin: .5rem 0 1rem; }
.state-delayed { color: var(--muted); }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(19rem, 1fr)); gap: .75rem; }
.chart { margin: 0; background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: .6rem .8rem; }
.chart figcaption { font-size: .85rem; color: var(--muted); font-weight: 600; margin-bottom: .3rem; }
.plot svg { display: block; width: 100%; height: 7.5rem; overflow: visible; }
.plot .grid { stroke: var(--line); stroke-width: 1; vector-effect: non-scaling-stroke; }
.plot .line { fill: none; stroke-width: 2; vector-effect: non-scaling-stroke; stroke-linejoin: round; }
.legend { display: flex; flex-wrap: wrap; gap: .15rem .8rem; font-size: .8rem; margin-top: .35rem; }
.legend .key::before { content: ""; display: inline-block; width: .7rem; height: .7rem; border-radius: 2px;
  margin-right: .3rem; vertical-align: -.05rem; background: currentColor; }
.scale { font-size: .75rem; color: var(--muted); }
.series-ready { stroke: var(--ok); color: var(--ok); } .series-waiting { stroke: #8250df; color: #8250df; }
.series-in_flight { stroke: var(--accent); color: var(--accent); } .series-parked { stroke: var(--warn); color: var(--warn); }
.series-delayed { stroke: var(--muted); color: var(--muted); } .series-dead_letters { stroke: var(--bad); color: var(--bad); }
.series-published { stroke: var(--accent); color: var(--accent); } .series-acked { stroke: var(--ok); color: var(--ok); }
.series-oldest_age { stroke: var(--warn); color: var(--warn); }
.key-form { border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; margin: .5rem 0 1rem; }
.key-form label { margin-right: .75rem; } .key-form input[type=text], .key-form input[type=number] { font: inherit;
  padding: .25rem .4rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
.new-key { border: 1px solid var(--ok); border-radius: 8px; padding: .5rem 1rem; }
[hidden] { display: none !important; }
`;
