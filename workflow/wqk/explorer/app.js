/* The explorer page (wqk.explorer): the index and, unless loaded on demand, every model's
   data are JSON in the page; the selection lives in the URL's hash. */
"use strict";
(function () {
  const INDEX = JSON.parse(document.getElementById("wqk-index").textContent);
  const MODELS = JSON.parse(document.getElementById("wqk-models").textContent);
  const BY_SLUG = {};
  INDEX.models.forEach(function (m) { BY_SLUG[m.slug] = m; });
  const PAPER = ["symmetry", "directionality"];
  const SPECTRA = ["stable_rank", "effective_rank", "spectral_radius", "real_eig_share", "sym_positive_share"];
  // the follow-up papers' families (wqk.fingerprint, wqk.bilinear_forms, wqk.qk_spectra), where computed
  const FOLLOW_UPS = {
    "plot-fingerprint": ["dir_frac", "D_head", "henrici", "cond_eig", "content_pos_frac", "prin_angle_mean",
      "rope_imag_frac"],
    "plot-bilinear": ["symmetric_energy", "profile_c", "profile_d", "pairing", "rho", "head_type"],
    "plot-qk-spectra": ["sv2_mean", "sv2_std", "sv2_skew", "sv2_kurtosis"],
  };
  const FOLLOW_TITLES = {
    "plot-fingerprint": "qk-spectral-fingerprint metrics of the heads of layer ",
    "plot-bilinear": "attention-bilinear-forms metrics of the heads of layer ",
    "plot-qk-spectra": "qk-spectral-analysis statistics of sigma^2 of the heads of layer ",
  };
  const FOLLOW_COLUMNS = [].concat.apply([], Object.keys(FOLLOW_UPS).map(function (k) { return FOLLOW_UPS[k]; }));
  const ROTARY = "rotary_symmetry_d";
  const COLORS = { bidirectional: "#1f77b4", autoregressive: "#d62728", "cross-attention": "#2ca02c" };
  const CONFIG = { displaylogo: false, responsive: false, displayModeBar: "hover" };
  const KEYS = ["model", "stack", "layer", "head", "q", "objective", "modality", "family"];
  const FILTERS = ["objective", "modality", "family"];
  const state = {};
  const waiting = {};

  function $(id) { return document.getElementById(id); }

  function decimals(metric) {
    if (metric.indexOf(ROTARY) === 0) return INDEX.decimals.rotary;
    return metric in INDEX.decimals.columns ? INDEX.decimals.columns[metric] : INDEX.decimals.default;
  }

  function fmt(value, metric) {
    if (value === null || value === undefined) return "\u2013";
    return value.toFixed(decimals(metric));
  }

  // A model's metric columns arrive as integers, value * 10^decimals (wqk.explorer.data).
  function decode(data) {
    Object.keys(data.stacks).forEach(function (stack) {
      ["layers", "heads"].forEach(function (scope) {
        const columns = data.stacks[stack][scope];
        Object.keys(columns).forEach(function (m) {
          if (m === "layer" || m === "head") return;
          const scale = Math.pow(10, decimals(m));
          columns[m] = columns[m].map(function (v) { return v === null ? null : v / scale; });
        });
      });
    });
    data.decoded = true;
    return data;
  }

  function message(text) { $("message").textContent = text || ""; }

  // ------------------------------------------------------------ the data of a model
  window.wqkModel = function (data) {
    MODELS[data.slug] = decode(data);
    const callbacks = waiting[data.slug] || [];
    delete waiting[data.slug];
    callbacks.forEach(function (f) { f(); });
  };

  function withModel(slug, done) {
    if (MODELS[slug]) {
      if (!MODELS[slug].decoded) decode(MODELS[slug]);
      done();
      return;
    }
    if (!INDEX.split) { message("No data for " + slug + " in this page."); return; }
    if (waiting[slug]) { waiting[slug].push(done); return; }
    waiting[slug] = [done];
    const script = document.createElement("script");
    script.src = "data/" + encodeURIComponent(slug) + ".js";
    script.onerror = function () {
      delete waiting[slug];
      message("The data of " + slug + " are not beside this page (data/" + slug +
        ".js): open results/explorer/index.html in the run's folder.");
    };
    document.head.appendChild(script);
  }

  // ------------------------------------------------------------ the URL's hash
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    KEYS.forEach(function (k) { state[k] = p.has(k) ? p.get(k) : ""; });
    ["layer", "head"].forEach(function (k) { state[k] = state[k] === "" ? null : Number(state[k]); });
  }

  function writeHash() {
    const p = new URLSearchParams();
    KEYS.forEach(function (k) {
      if (state[k] !== "" && state[k] !== null && state[k] !== undefined) p.set(k, String(state[k]));
    });
    const hash = "#" + p.toString();
    if (hash !== location.hash) history.replaceState(null, "", hash);
  }

  // ------------------------------------------------------------ controls
  function options(select, items, selected) {
    select.textContent = "";
    items.forEach(function (item) {
      const o = document.createElement("option");
      o.value = String(item[0]);
      o.textContent = item[1];
      select.appendChild(o);
    });
    select.value = String(selected);
  }

  function distinct(values) { return Array.from(new Set(values)).sort(); }

  function setUpFilters() {
    const values = {
      objective: distinct([].concat.apply([], INDEX.models.map(function (m) {
        return m.stacks.map(function (s) { return s.objective; });
      }))),
      modality: distinct(INDEX.models.map(function (m) { return m.modality; })),
      family: distinct(INDEX.models.map(function (m) { return m.family; })),
    };
    FILTERS.forEach(function (k) {
      const select = $("filter-" + k);
      options(select, [["", "all"]].concat(values[k].map(function (v) { return [v, v]; })), state[k]);
      select.addEventListener("change", function () { state[k] = select.value; render(); });
    });
    $("search").addEventListener("input", function () { state.q = $("search").value; render(); });
    $("model").addEventListener("change", function () { pick($("model").value, "", null, null); });
    $("stack").addEventListener("change", function () { pick(state.model, $("stack").value, null, null); });
    $("layer").addEventListener("change", function () {
      pick(state.model, state.stack, Number($("layer").value), null);
    });
    $("head").addEventListener("change", function () {
      pick(state.model, state.stack, state.layer, Number($("head").value));
    });
  }

  function pick(model, stack, layer, head) {
    state.model = model; state.stack = stack; state.layer = layer; state.head = head;
    render();
  }

  function passes(m) {
    if (state.modality && m.modality !== state.modality) return false;
    if (state.family && m.family !== state.family) return false;
    if (state.objective && !m.stacks.some(function (s) { return s.objective === state.objective; })) return false;
    const q = state.q.trim().toLowerCase();
    return !q || m.model.toLowerCase().indexOf(q) >= 0 || m.slug.indexOf(q) >= 0;
  }

  // ------------------------------------------------------------ rendering
  function render() {
    FILTERS.forEach(function (k) { $("filter-" + k).value = state[k]; });
    if ($("search").value !== state.q) $("search").value = state.q;
    const shown = INDEX.models.filter(passes);
    $("count").textContent = shown.length + " of " + INDEX.models.length + " models";
    if (state.model && !BY_SLUG[state.model]) {  // a model id (org/name) names its slug
      const named = INDEX.models.find(function (m) { return m.model === state.model; });
      if (named) state.model = named.slug;
    }
    if (state.model && !BY_SLUG[state.model]) {
      state.notice = "No model " + state.model + " in this explorer: showing " +
        (shown.length ? shown[0].model : "none") + " instead.";
      state.model = shown.length ? shown[0].slug : "";  // the URL's stack, layer, head still checked
    }
    // a search or filter that leaves the picked model out picks the first it shows
    if (shown.length && !shown.some(function (m) { return m.slug === state.model; })) {
      state.model = shown[0].slug; state.stack = ""; state.layer = null; state.head = null;
    }
    const listed = shown.length || !state.model ? shown : [BY_SLUG[state.model]];
    options($("model"), listed.map(function (m) { return [m.slug, m.model]; }), state.model);
    drawOverview(shown);
    if (!state.model) { writeHash(); return; }
    withModel(state.model, renderModel);
  }

  function stackOf(entry, name) {
    return entry.stacks.filter(function (s) { return s.stack === name; })[0];
  }

  function renderModel() {
    const entry = BY_SLUG[state.model];
    const data = MODELS[state.model];
    const stacks = entry.stacks.map(function (s) { return s.stack; }).filter(function (s) { return data.stacks[s]; });
    state.stack = available("stack", state.stack, stacks);
    const st = data.stacks[state.stack];
    const layers = distinct((st.layers.layer || []).concat(st.heads.layer || [])).sort(function (a, b) { return a - b; });
    state.layer = available("layer", state.layer, layers);
    const heads = rowsOfLayer(st.heads, state.layer).map(function (i) { return st.heads.head[i]; });
    state.head = available("head", state.head, heads);
    options($("stack"), stacks.map(function (s) { return [s, s + " (" + stackOf(entry, s).objective + ")"]; }), state.stack);
    options($("layer"), layers.map(function (l) { return [l, String(l)]; }), state.layer);
    options($("head"), heads.map(function (h) { return [h, String(h)]; }), state.head);
    const info = stackOf(entry, state.stack);
    $("model-info").textContent = [
      entry.model, entry.family, entry.modality,
      entry.n_params === null ? "parameters unknown" : (entry.n_params / 1e6).toFixed(1) + "M parameters",
      state.stack + ": " + info.objective + ", " + info.n_layers + " layers, " + info.n_heads + " heads",
    ].concat(entry.synthetic ? ["synthetic (random weights, never data)"] : []).join(" \u00b7 ");
    message(state.notice);  // a pick of the URL this page does not have, said once
    state.notice = "";
    drawHeads(st);
    drawNull(st);
    drawDepth(st);
    drawSpectra(st);
    Object.keys(FOLLOW_UPS).forEach(function (id) {
      drawPanels(st, id, FOLLOW_UPS[id], FOLLOW_TITLES[id] + state.layer);
    });
    drawRotary(st);
    fillValues(st);
    writeHash();
    document.body.dataset.shown = [state.model, state.stack, state.layer, state.head].join("|");
  }

  // The value picked if the model has it, else its first; a pick it lacks (from the URL) is said.
  function available(what, value, values) {
    if (values.indexOf(value) >= 0) return value;
    const first = values.length ? values[0] : null;
    if (value !== "" && value !== null && value !== undefined) {
      state.notice = (state.notice ? state.notice + " " : "") + "No " + what + " " + value + " in " +
        state.model + ": showing " + what + " " + first + ".";
    }
    return first;
  }

  function rowsOfLayer(columns, layer) {
    const out = [];
    (columns.layer || []).forEach(function (l, i) { if (l === layer) out.push(i); });
    return out;
  }

  function metricsOf(columns) {
    const rotary = Object.keys(columns).filter(function (k) { return k.indexOf(ROTARY) === 0; })
      .sort(function (a, b) { return offset(a) - offset(b); });
    return PAPER.concat(SPECTRA, FOLLOW_COLUMNS).filter(function (m) { return m in columns; }).concat(rotary);
  }

  function offset(column) { return Number(column.slice(ROTARY.length)); }

  // The title sits just above the plotting area and the top margin leaves the band above it to
  // Plotly's mode bar (shown on hover at the top right), so that the bar never covers a title.
  function layout(title, extra) {
    return Object.assign({
      title: { text: title, font: { size: 13 }, x: 0, xref: "paper", xanchor: "left",
        y: 1, yref: "paper", yanchor: "bottom", pad: { b: 8 } },
      margin: { l: 55, r: 15, t: 62, b: 45 },
      legend: { orientation: "h", y: -0.18, font: { size: 11 } },
      font: { family: "DejaVu Sans, Helvetica, Arial, sans-serif", size: 11 },
    }, extra);
  }

  // one tick per layer or head while they are few; Plotly's own spacing beyond
  function tick(values) { return distinct(values).length <= 12 ? 1 : undefined; }

  function show(id, shown) { $(id).classList.toggle("hidden", !shown); }

  function drawOverview(shown) {
    const traces = {};
    shown.forEach(function (m) {
      m.stacks.forEach(function (s) {
        if (s.symmetry_median === null || s.directionality_median === null) return;
        const t = traces[s.objective] = traces[s.objective] || {
          type: "scatter", mode: "markers", name: s.objective, x: [], y: [], text: [], customdata: [],
          marker: { color: COLORS[s.objective] || "#7f7f7f", size: 8, opacity: 0.8 },
          hovertemplate: "%{text}<br>symmetry %{x:.4f}<br>directionality %{y:.4f}<extra></extra>",
        };
        t.x.push(s.symmetry_median); t.y.push(s.directionality_median);
        t.text.push(m.model + " (" + s.stack + ")"); t.customdata.push([m.slug, s.stack]);
      });
    });
    const data = Object.keys(traces).sort().map(function (k) { return traces[k]; });
    const entry = BY_SLUG[state.model];
    if (entry) {
      const s = stackOf(entry, state.stack) || entry.stacks[0];
      data.push({ type: "scatter", mode: "markers", name: "picked", x: [s.symmetry_median], y: [s.directionality_median],
        marker: { color: "rgba(0,0,0,0)", size: 16, line: { color: "#000", width: 2 } }, hoverinfo: "skip" });
    }
    Plotly.react("plot-overview", data, layout("Models: median over layers (click a point to pick it)", {
      xaxis: { title: { text: "symmetry" } }, yaxis: { title: { text: "directionality" } },
      legend: { orientation: "v", x: 1.01, y: 1 },
    }), CONFIG);
  }

  function spreadTraces(spread, name) {
    const s = spread.symmetry, d = spread.directionality;
    if (!s || !d) return [];
    const box = { type: "scatter", mode: "lines", name: name + ", 25\u201375%", hoverinfo: "skip",
      x: [s.q25, s.q75, s.q75, s.q25, s.q25], y: [d.q25, d.q25, d.q75, d.q75, d.q25],
      fill: "toself", fillcolor: "rgba(120,120,120,0.2)", line: { color: "#888", width: 1 } };
    if (s.q05 === undefined) return [box];
    return [box, { type: "scatter", mode: "lines", name: name + ", 5\u201395%", hoverinfo: "skip",
      x: [s.q05, s.q95, null, s.q50, s.q50], y: [d.q50, d.q50, null, d.q05, d.q95],
      line: { color: "#888", width: 1, dash: "dot" } }];
  }

  function drawHeads(st) {
    const h = st.heads;
    const groups = { other: { x: [], y: [], text: [] }, layer: { x: [], y: [], text: [] }, head: { x: [], y: [], text: [] } };
    (h.layer || []).forEach(function (l, i) {
      const g = l !== state.layer ? groups.other : (h.head[i] === state.head ? groups.head : groups.layer);
      g.x.push(h.symmetry[i]); g.y.push(h.directionality[i]); g.text.push("layer " + l + ", head " + h.head[i]);
    });
    const hover = "%{text}<br>symmetry %{x:.4f}<br>directionality %{y:.4f}<extra></extra>";
    const data = spreadTraces((st.null || {}).heads || {}, "null reference").concat([
      Object.assign({ type: "scatter", mode: "markers", name: "other layers", hovertemplate: hover,
        marker: { color: "#bbb", size: 5 } }, groups.other),
      Object.assign({ type: "scatter", mode: "markers", name: "layer " + state.layer, hovertemplate: hover,
        marker: { color: "#1f77b4", size: 8 } }, groups.layer),
      Object.assign({ type: "scatter", mode: "markers", name: "head " + state.head, hovertemplate: hover,
        marker: { color: "#d62728", size: 14, symbol: "star" } }, groups.head),
    ]);
    Plotly.react("plot-heads", data, layout("Heads of the " + state.stack + ": symmetry against directionality", {
      xaxis: { title: { text: "symmetry" } }, yaxis: { title: { text: "directionality" }, range: [-1.08, 1.08] },
    }), CONFIG);
  }

  function drawNull(st) {
    const h = st.heads, spread = (st.null || {}).heads || {};
    const data = [];
    PAPER.forEach(function (m) {
      data.push({ type: "box", name: "heads", legendgroup: "heads", showlegend: m === "symmetry",
        x: (h[m] || []).map(function () { return m; }), y: h[m] || [], marker: { color: "#1f77b4" }, boxpoints: false });
    });
    const known = PAPER.filter(function (m) { return spread[m]; });
    if (known.length) {
      const q = function (k) { return known.map(function (m) { return spread[m][k]; }); };
      const box = { type: "box", name: "null reference", x: known, q1: q("q25"), median: q("q50"), q3: q("q75"),
        marker: { color: "#888" } };
      if (spread[known[0]].q05 !== undefined) { box.lowerfence = q("q05"); box.upperfence = q("q95"); }
      data.push(box);
    }
    const title = known.length ? "This stack's heads beside the null reference (random Q, K)"
      : "This stack's heads (no null reference in this run)";
    Plotly.react("plot-null", data, layout(title, { boxmode: "group", yaxis: { range: [-1.08, 1.08] } }), CONFIG);
  }

  function drawDepth(st) {
    const l = st.layers, h = st.heads, spread = (st.null || {}).layers || {};
    const data = [], shapes = [];
    PAPER.forEach(function (m, k) {
      const axis = k ? "y2" : "y";
      data.push({ type: "scatter", mode: "markers", name: "heads", legendgroup: "heads", showlegend: !k, yaxis: axis,
        x: h.layer || [], y: h[m] || [], marker: { color: "#bbb", size: 5 }, hovertemplate: "layer %{x}: %{y:.4f}<extra>head</extra>" });
      if (l[m]) {
        data.push({ type: "scatter", mode: "lines+markers", name: "layer form (sum of heads)", legendgroup: "layer",
          showlegend: !k, yaxis: axis, x: l.layer, y: l[m], line: { color: COLORS[objectiveOf()] || "#1f77b4" },
          hovertemplate: "layer %{x}: %{y:.4f}<extra>layer</extra>" });
      }
      if (spread[m]) {
        shapes.push({ type: "rect", xref: "paper", x0: 0, x1: 1, yref: axis, y0: spread[m].q25, y1: spread[m].q75,
          fillcolor: "rgba(120,120,120,0.18)", line: { width: 0 }, layer: "below" });
      }
    });
    shapes.push({ type: "line", xref: "x", x0: state.layer, x1: state.layer, yref: "paper", y0: 0, y1: 1,
      line: { color: "#d62728", width: 1, dash: "dot" } });
    const title = "Depth profile" + (Object.keys(spread).length ? " (grey band: null reference over layers, 25\u201375%)" : "");
    Plotly.react("plot-depth", data, layout(title, {
      shapes: shapes,
      xaxis: { title: { text: "layer" }, anchor: "y2", dtick: tick(l.layer || h.layer || []) },
      yaxis: { title: { text: "symmetry" }, domain: [0.55, 1] },
      yaxis2: { title: { text: "directionality" }, domain: [0, 0.45], range: [-1.08, 1.08] },
    }), CONFIG);
  }

  function objectiveOf() {
    const s = stackOf(BY_SLUG[state.model], state.stack);
    return s ? s.objective : "";
  }

  function drawSpectra(st) {
    drawPanels(st, "plot-spectra", SPECTRA, "Spectra of the heads of layer " + state.layer);
  }

  // One panel per metric of `metrics` the model has, against the head, the picked head marked.
  function drawPanels(st, id, metrics, title) {
    const h = st.heads, spread = (st.null || {}).heads || {};
    const present = metrics.filter(function (m) { return h[m]; });
    show(id, present.length);
    if (!present.length) { Plotly.purge(id); return; }
    const rows = rowsOfLayer(h, state.layer);
    const x = rows.map(function (i) { return h.head[i]; });
    const data = [], shapes = [], axes = {};
    const width = 1 / present.length;
    present.forEach(function (m, k) {
      const n = k ? String(k + 1) : "";
      data.push({ type: "scatter", mode: "lines+markers", name: m, xaxis: "x" + n, yaxis: "y" + n, x: x,
        y: rows.map(function (i) { return h[m][i]; }), showlegend: false,
        marker: { size: x.map(function (v) { return v === state.head ? 13 : 6; }),
          color: x.map(function (v) { return v === state.head ? "#d62728" : "#1f77b4"; }) },
        hovertemplate: "head %{x}: %{y}<extra>" + m + "</extra>" });
      axes["xaxis" + n] = { domain: [k * width + 0.03, (k + 1) * width - 0.03], anchor: "y" + n, dtick: tick(x),
        title: { text: "head" } };
      axes["yaxis" + n] = { anchor: "x" + n, title: { text: m, standoff: 2 } };
      if (spread[m]) {
        shapes.push({ type: "line", xref: "x" + n + " domain", x0: 0, x1: 1, yref: "y" + n, y0: spread[m].q50,
          y1: spread[m].q50, line: { color: "#888", dash: "dash", width: 1 } });
      }
    });
    Plotly.react(id, data, layout(title + (shapes.length ? " (dashed: null reference median)" : ""),
      Object.assign({ shapes: shapes }, axes)), CONFIG);
  }

  function drawRotary(st) {
    const h = st.heads, l = st.layers;
    const columns = metricsOf(h).filter(function (m) { return m.indexOf(ROTARY) === 0; });
    show("plot-rotary", columns.length);
    if (!columns.length) { Plotly.purge("plot-rotary"); return; }
    columns.unshift("symmetry");  // s(0) is the symmetry (not carried twice)
    const x = columns.map(function (c) { return c === "symmetry" ? "0" : String(offset(c)); });
    const rows = rowsOfLayer(h, state.layer);
    const picked = rows.filter(function (i) { return h.head[i] === state.head; })[0];
    const data = [{ type: "scatter", mode: "lines+markers", name: "head " + state.head, x: x,
      y: columns.map(function (c) { return picked === undefined ? null : h[c][picked]; }), line: { color: "#d62728" } }];
    const lr = rowsOfLayer(l, state.layer)[0];
    if (lr !== undefined && columns.some(function (c) { return c !== "symmetry" && l[c]; })) {
      data.push({ type: "scatter", mode: "lines+markers", name: "layer " + state.layer, x: x,
        y: columns.map(function (c) { return l[c] ? l[c][lr] : null; }), line: { color: "#1f77b4" } });
    }
    Plotly.react("plot-rotary", data, layout("Rotary s(d): symmetry at relative offset d", {
      xaxis: { title: { text: "offset d (tokens)" }, type: "category" },
      yaxis: { title: { text: "s(d)" }, range: [-1.08, 1.08] },
    }), CONFIG);
  }

  function fillValues(st) {
    const h = st.heads, l = st.layers, spread = (st.null || {}).heads || {};
    const i = rowsOfLayer(h, state.layer).filter(function (r) { return h.head[r] === state.head; })[0];
    const j = rowsOfLayer(l, state.layer)[0];
    const body = $("head-values").tBodies[0];
    body.textContent = "";
    metricsOf(h).concat(metricsOf(l).filter(function (m) { return !(m in h); })).forEach(function (m) {
      const tr = document.createElement("tr");
      tr.dataset.metric = m;
      const q = spread[m];
      [m, h[m] && i !== undefined ? fmt(h[m][i], m) : "\u2013", l[m] && j !== undefined ? fmt(l[m][j], m) : "\u2013",
        q ? fmt(q.q25, m) + " \u2013 " + fmt(q.q75, m) : "\u2013"].forEach(function (text, k) {
        const td = document.createElement("td");
        td.className = ["metric", "head", "layer", "null"][k];
        td.textContent = text;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    $("values-title").textContent = BY_SLUG[state.model].model + ", " + state.stack + ", layer " + state.layer +
      ", head " + state.head;
  }

  // ------------------------------------------------------------ start
  $("version").textContent = INDEX.version;
  readHash();
  setUpFilters();
  render();
  $("plot-overview").on("plotly_click", function (event) {  // .on exists once Plotly has drawn
    const point = event.points[0];
    if (point && point.customdata) pick(point.customdata[0], point.customdata[1], null, null);
  });
  window.addEventListener("hashchange", function () { readHash(); render(); });
})();
