// cafe run report: renders the item browser from the JSON blob in #cafe-data. No network, no
// libraries. Deep link: #item=<id>&run=<source>.<run index> (source 0 = A, 1 = B).
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("cafe-data").textContent);
  var CATS = D.categories;
  var TWO = D.sources.length > 1;
  var rows = [];
  D.items.forEach(function (it) {
    it.preds.forEach(function (p) {
      rows.push({ it: it, p: p, key: keyOf(it.id, p.s, p.r) });
    });
  });
  var byKey = {};
  rows.forEach(function (r) { byKey[r.key] = r; });
  var flipOf = {};
  if (D.comparison) {
    [["right_to_wrong", "right → wrong"], ["wrong_to_right", "wrong → right"]].forEach(function (f) {
      D.comparison.flips[f[0]].forEach(function (k) {
        flipOf[k[0] + "\u0000" + k[1]] = f[0];
      });
    });
  }

  function keyOf(id, s, r) {
    return "item=" + encodeURIComponent(id) + "&run=" + s + "." + r;
  }
  function esc(x) {
    return String(x == null ? "" : x).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function unpack(v, raw) {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      var ks = Object.keys(v);
      if (ks.length === 1 && ks[0] === "@") return (raw || "").slice(v["@"][0], v["@"][1]);
      var o = {};
      ks.forEach(function (k) { o[k] = unpack(v[k], raw); });
      return o;
    }
    if (Array.isArray(v)) return v.map(function (x) { return unpack(x, raw); });
    return v;
  }
  function runLabel(p) {
    return (TWO ? D.sources[p.s].key + " " : "") + "run " + p.r;
  }
  // a big page keeps each unit's output, sections and judge lists gzip-compressed in pages
  // (D.pages, base64); p.d = [page, index] until they are opened into p
  var PAGES = D.pages || [];
  var opened = {};
  function openPage(i) {
    if (!opened[i]) {
      var bin = atob(PAGES[i]);
      var bytes = new Uint8Array(bin.length);
      for (var k = 0; k < bin.length; k++) bytes[k] = bin.charCodeAt(k);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      opened[i] = new Response(stream).text().then(JSON.parse);
    }
    return opened[i];
  }
  function withDetails(preds) {
    return Promise.all(preds.filter(function (p) { return p.d; }).map(function (p) {
      return openPage(p.d[0]).then(function (page) {
        var h = page[p.d[1]];
        Object.keys(h).forEach(function (k) {
          if (k === "j") Object.assign(p.j, h.j); else p[k] = h[k];
        });
        delete p.d;
      });
    }));
  }
  var allOpen = PAGES.length === 0;
  function nOf(p, c) {
    if (!p.j) return 0;
    return p.j.n ? (p.j.n[c] || 0) : (p.j.lists[c] || []).length;
  }
  function judgeText(p) {
    if (!p.j || !p.j.lists) return "";
    var out = [];
    Object.keys(p.j.lists).forEach(function (c) { out = out.concat(p.j.lists[c]); });
    return out.join(" ");
  }
  function setText(r) {
    var it = r.it, p = r.p;
    r.text = [it.id, it.q, (it.choices || []).join(" "), it.answer, p.out, p.ans, p.err, p.fr ? p.fr.text : null, judgeText(p)]
      .join("\n").toLowerCase();
  }
  rows.forEach(setText);

  // filters ---------------------------------------------------------------------------------
  var F = document.getElementById("filters");
  function select(id, name, options) {
    var wrap = el("label", "f", name + " ");
    var s = el("select");
    s.id = id;
    options.forEach(function (o) {
      var opt = el("option", null, o[1]);
      opt.value = o[0];
      s.appendChild(opt);
    });
    s.addEventListener("change", renderList);
    wrap.appendChild(s);
    F.appendChild(wrap);
    return s;
  }
  function uniq(values) {
    var seen = {}, out = [];
    values.forEach(function (v) {
      if (v != null && !seen[v]) { seen[v] = 1; out.push(v); }
    });
    return out.sort();
  }
  var text = el("input");
  text.id = "f-text";
  text.type = "search";
  text.placeholder = "search question, output, events…";
  text.addEventListener("input", renderList);
  F.appendChild(text);
  select("f-outcome", "outcome", [["", "all"], ["correct", "correct"], ["wrong", "wrong"]]);
  select("f-ps", "parse", [["", "all"]].concat(uniq(rows.map(function (r) { return r.p.ps; }))
    .map(function (v) { return [v, v]; })));
  if (TWO) {
    select("f-src", "run folder", [["", "A and B"]].concat(D.sources.map(function (s, i) {
      return [String(i), s.key + ": " + s.title];
    })));
    select("f-flip", "flip", [["", "all"], ["right_to_wrong", "right → wrong"],
      ["wrong_to_right", "wrong → right"]]);
  }
  D.breakdowns.forEach(function (k) {
    var vals = uniq(D.items.map(function (it) { return it.meta[k]; }));
    if (vals.length) {
      select("f-bd-" + k, k, [["", "all"]].concat(vals.map(function (v) { return [String(v), String(v)]; })))
        .dataset.key = k;
    }
  });
  select("f-cat", "judge", [["", "any"]].concat(CATS.map(function (c) { return [c, "has " + c]; }))
    .concat([["none", "not judged"]]));
  select("f-sort", "sort", [["", "item order"], ["len-asc", "reasoning length ↑"],
    ["len-desc", "reasoning length ↓"]]);
  var count = el("span", "count");
  count.id = "f-count";
  F.appendChild(count);

  function val(id) {
    var e = document.getElementById(id);
    return e ? e.value : "";
  }
  function passes(r) {
    var p = r.p, it = r.it;
    var o = val("f-outcome");
    if (o === "correct" && !p.ok) return false;
    if (o === "wrong" && p.ok) return false;
    var ps = val("f-ps");
    if (ps && p.ps !== ps) return false;
    var src = val("f-src");
    if (src && String(p.s) !== src) return false;
    var flip = val("f-flip");
    if (flip && flipOf[it.id + "\u0000" + p.r] !== flip) return false;
    var bad = false;
    D.breakdowns.forEach(function (k) {
      var v = val("f-bd-" + k);
      if (v && String(it.meta[k]) !== v) bad = true;
    });
    if (bad) return false;
    var cat = val("f-cat");
    if (cat === "none" && p.j) return false;
    if (cat && cat !== "none" && !nOf(p, cat)) return false;
    var q = text.value.trim().toLowerCase();
    if (q && r.text.indexOf(q) < 0) return false;
    return true;
  }
  function sorted(list) {
    var s = val("f-sort");
    if (!s) return list;
    var sign = s === "len-asc" ? 1 : -1;
    return list.slice().sort(function (a, b) {
      var x = a.p.len, y = b.p.len;
      if (x == null && y == null) return 0;
      if (x == null) return 1;  // unknown lengths last either way
      if (y == null) return -1;
      return sign * (x - y);
    });
  }

  // list ------------------------------------------------------------------------------------
  var LIST = document.getElementById("list");
  function counts(p) {
    if (!p.j) return "";
    return CATS.map(function (c) {
      var n = nOf(p, c);
      return n ? '<span class="chip ev-' + c + '" title="' + c + '">' + n + "</span>" : "";
    }).join("");
  }
  // the table is built once; filters hide rows and sorting moves them (a 3,000-row report
  // stays responsive)
  var TBODY = null;
  function buildList() {
    var html = ['<table id="rows"><thead><tr><th>item</th><th>run</th><th></th><th>parse</th>' +
      "<th>answer</th><th>" + esc(lengthHead()) + "</th><th>judge</th></tr></thead><tbody>"];
    rows.forEach(function (r) {
      var p = r.p;
      html.push('<tr data-key="' + esc(r.key) + '" class="' + (p.ok ? "ok" : "bad") + '">' +
        '<td><a href="#' + esc(r.key) + '">' + esc(r.it.id) + "</a></td><td>" + esc(runLabel(p)) +
        "</td><td>" + (p.ok ? "✓" : "✗") + "</td><td>" + esc(p.ps) + "</td><td>" + esc(p.ans) +
        "</td><td>" + esc(p.len) + "</td><td>" + counts(p) + "</td></tr>");
    });
    html.push("</tbody></table>");
    LIST.innerHTML = html.join("");
    TBODY = LIST.querySelector("tbody");
    LIST.appendChild(MORE);
    var trs = TBODY.children;
    rows.forEach(function (r, i) { r.tr = trs[i]; });
  }
  var sortedBy = "";
  var LIST_STEP = D.list_step || 1000;
  var listed = LIST_STEP;
  var MORE = el("button", null, "list " + LIST_STEP + " more");
  MORE.id = "list-more";
  MORE.hidden = true;
  MORE.addEventListener("click", function () { listed += LIST_STEP; renderList(); });
  function renderList() {
    if (!allOpen && text.value.trim()) {  // searching the outputs: open every page first
      count.textContent = "opening the outputs to search them…";
      withDetails(rows.map(function (r) { return r.p; })).then(function () {
        allOpen = true;
        rows.forEach(setText);
        renderList();
      });
      return;
    }
    var s = val("f-sort");
    var order = sorted(rows);
    if (s !== sortedBy) {
      sortedBy = s;
      var frag = document.createDocumentFragment();
      order.forEach(function (r) { frag.appendChild(r.tr); });
      TBODY.appendChild(frag);
    }
    // the first `listed` rows that pass are shown: a 30,000-row table laid out whole took
    // Chromium seconds; the rest come LIST_STEP at a time
    var n = 0;
    order.forEach(function (r) {
      var ok = passes(r);
      var show = ok && n < listed;
      if (r.tr.hidden === show) r.tr.hidden = !show;
      if (ok) n++;
    });
    count.textContent = n + " of " + rows.length + " (item, run) outputs" +
      (n > listed ? " (the first " + listed + " listed)" : "");
    MORE.hidden = n <= listed;
    markCurrent();
  }
  var typing = null;
  text.removeEventListener("input", renderList);
  text.addEventListener("input", function () {
    clearTimeout(typing);
    typing = setTimeout(renderList, 150);
  });

  // detail ----------------------------------------------------------------------------------
  var DETAIL = document.getElementById("detail");
  function highlighted(out, spans) {
    var pre = el("pre", "out");
    var at = 0;
    (spans || []).forEach(function (s) {
      if (s[0] < at) return;
      pre.appendChild(document.createTextNode(out.slice(at, s[0])));
      var m = el("mark", "ev ev-" + s[2], out.slice(s[0], s[1]));
      m.dataset.cat = s[2];
      m.title = s[2];
      pre.appendChild(m);
      at = s[1];
    });
    pre.appendChild(document.createTextNode(out.slice(at)));
    return pre;
  }
  function sectionsBlock(p) {
    var sec = unpack(p.sec || {}, p.out);
    var keys = Object.keys(sec);
    var d = el("details", "sections");
    d.appendChild(el("summary", null, "parsed sections (" + keys.join(", ") + ")"));
    var t = el("table", "kv");
    keys.forEach(function (k) {
      var tr = el("tr");
      tr.appendChild(el("th", null, k));
      var td = el("td");
      var v = sec[k];
      td.appendChild(el("pre", null, typeof v === "string" ? v : JSON.stringify(v, null, 1)));
      tr.appendChild(td);
      t.appendChild(tr);
    });
    d.appendChild(t);
    return d;
  }
  function judgeBlock(j) {
    var box = el("div", "judge");
    box.appendChild(el("h5", null, "CAFE judge: " + j.judge + " (" + j.status +
      (j.reason ? ": " + j.reason : "") + ")"));
    CATS.forEach(function (c) {
      var list = j.lists[c] || [];
      var row = el("div", "jl");
      row.appendChild(el("span", "chip ev-" + c, c + " " + list.length));
      var ul = el("ul", "events");
      ul.dataset.cat = c;
      list.forEach(function (e) { ul.appendChild(el("li", null, e)); });
      row.appendChild(ul);
      box.appendChild(row);
    });
    if (j.raw) {
      var d = el("details", "raw");
      d.appendChild(el("summary", null, "raw judge reply"));
      d.appendChild(el("pre", null, j.raw));
      box.appendChild(d);
    }
    return box;
  }
  // a cascade's front: the transcript or caption its text model answered from
  function frontBlock(fr) {
    var box = el("div", "front");
    box.appendChild(el("h5", null, "front " + (fr.front || "?") + " (" +
      (fr.latency_s == null ? "?" : fr.latency_s) + " s" + (fr.cached ? ", cached" : "") + ")"));
    box.appendChild(el("pre", "front-text", fr.text ? fr.text : "(empty)"));
    return box;
  }
  // a missing figure (null: not finite in the run folder) is "–", never Number(null) = 0
  function fixed(v, digits) {
    return v == null ? "–" : Number(v).toFixed(digits);
  }
  function optionScoresBlock(os) {
    var d = el("details", "option-scores");
    d.open = true;
    d.appendChild(el("summary", null, "option scores: " + (os.how || os.normalise)));
    var t = el("table", "kv");
    (os.choices || []).forEach(function (c, i) {
      var tr = el("tr");
      tr.appendChild(el("th", null, c));
      tr.appendChild(el("td", null, "score " + fixed(os.scores && os.scores[i], 4) +
        " · log-likelihood " + fixed(os.logprobs && os.logprobs[i], 3)));
      t.appendChild(tr);
    });
    d.appendChild(t);
    return d;
  }
  // one name for the reasoning length everywhere (list, item view, figures): "reasoning
  // length" and its unit, tokens of the model's tokenizer or words where the run had none
  function lengthHead() {
    var units = D.sources.map(function (s) { return s.unit || "length"; });
    var same = units.every(function (u) { return u === units[0]; });
    return "reasoning length" + (same && units[0] !== "length" ? " (" + units[0] + ")" : "");
  }
  function predBlock(it, p) {
    var col = el("div", "pred " + (p.ok ? "ok" : "bad"));
    col.dataset.key = keyOf(it.id, p.s, p.r);
    col.appendChild(el("h4", null, runLabel(p) + ": " + (p.ok ? "correct" : "wrong")));
    var facts = el("p", "facts");
    facts.innerHTML = "extracted answer <b>" + esc(p.ans == null ? "(none)" : p.ans) +
      "</b> · parse status <b class=\"ps\">" + esc(p.ps) + "</b> · reasoning length " + esc(p.len == null ? "?" : p.len) + " " +
      esc(D.sources[p.s].unit || "") + (p.err ? " · error: " + esc(p.err) : "");
    col.appendChild(facts);
    if (p.fr) col.appendChild(frontBlock(p.fr));
    if (p.out != null) col.appendChild(highlighted(p.out, p.j && p.j.spans));
    else col.appendChild(el("p", "note", "no output"));
    if (p.os) col.appendChild(optionScoresBlock(p.os));
    if (p.sec && Object.keys(p.sec).length) col.appendChild(sectionsBlock(p));
    if (p.j) col.appendChild(judgeBlock(p.j));
    return col;
  }
  function showItem(key) {
    var r = byKey[key];
    if (!r) {
      DETAIL.innerHTML = '<p class="note">No (item, run) ' + esc(decodeURIComponent(key)) + ".</p>";
      return;
    }
    var it = r.it, p = r.p;
    var closed = it.preds.filter(function (q) { return q.d; });
    if (closed.length) {  // its outputs are still in their compressed page
      withDetails(closed).then(function () { if (currentKey() === key) showItem(key); });
      return;
    }
    DETAIL.innerHTML = "";
    var head = el("h3", null, it.id);
    DETAIL.appendChild(head);
    var meta = el("p", "meta");
    Object.keys(it.meta).forEach(function (k) {
      meta.appendChild(el("span", "tag", k + ": " + it.meta[k]));
    });
    DETAIL.appendChild(meta);
    if (it.error) DETAIL.appendChild(el("p", "warn", it.error));
    DETAIL.appendChild(el("p", "question", it.q == null ? "(sample not in samples.jsonl)" : it.q));
    var ol = el("ol", "choices");
    (it.choices || []).forEach(function (c) {
      var li = el("li", null, c);
      if (c === it.answer) li.className = "answer";
      if (c === p.ans) li.className += " picked";
      ol.appendChild(li);
    });
    DETAIL.appendChild(ol);
    DETAIL.appendChild(el("p", "facts", "answer: " + (it.answer == null ? "(not shipped)" : it.answer)));
    (it.audio || []).forEach(function (a) {
      var box = el("div", "audio");
      var au = el("audio");
      au.controls = true;
      au.preload = "none";
      au.setAttribute("src", a.src);
      box.appendChild(au);
      var link = el("a", null, a.name);
      link.setAttribute("href", a.embedded ? "#" + key : a.src);
      box.appendChild(link);
      if (!a.exists) box.appendChild(el("span", "warn", " (file not found when the report was written)"));
      DETAIL.appendChild(box);
    });
    var others = el("p", "runs", "outputs: ");
    it.preds.forEach(function (q) {
      var k = keyOf(it.id, q.s, q.r);
      var a = el("a", q === p ? "current" : null, runLabel(q) + (q.ok ? " ✓" : " ✗"));
      a.setAttribute("href", "#" + k);
      others.appendChild(a);
      others.appendChild(document.createTextNode(" "));
    });
    DETAIL.appendChild(others);
    var grid = el("div", "side");
    var shown = [p];
    if (TWO) {  // side by side: the same run index in the other folder
      it.preds.forEach(function (q) { if (q.s !== p.s && q.r === p.r) shown.push(q); });
      shown.sort(function (x, y) { return x.s - y.s; });
    }
    shown.forEach(function (q) { grid.appendChild(predBlock(it, q)); });
    DETAIL.appendChild(grid);
  }
  function markCurrent() {
    var cur = document.querySelector("#rows tr.current");
    if (cur) cur.classList.remove("current");
    var key = currentKey();
    if (!key) return;
    var tr = document.querySelector('#rows tr[data-key="' + key.replace(/["\\]/g, "\\$&") + '"]');
    if (tr) tr.classList.add("current");
  }
  function currentKey() {
    // canonical form, whatever escaping the address bar or a hand-written link used
    var m = /^#item=(.*)&run=(\d+)\.(\d+)$/.exec(location.hash);
    if (!m) return null;
    var id;
    try { id = decodeURIComponent(m[1]); } catch (e) { id = m[1]; }
    return keyOf(id, +m[2], +m[3]);
  }
  function route() {
    var key = currentKey();
    if (!key) return;
    showItem(key);
    markCurrent();
    document.getElementById("items").scrollIntoView();
  }
  window.addEventListener("hashchange", route);
  buildList();
  renderList();
  route();
})();
