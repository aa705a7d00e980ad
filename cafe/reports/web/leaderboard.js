// cafe leaderboard: a click on a column header sorts the rows within each group (best first in
// the column's direction for metrics: ↑ high first, ↓ low first); a second click reverses; the
// model column sorts by name. Rows without a value go last.
(function () {
  "use strict";
  document.querySelectorAll("table.board").forEach(function (table) {
    var state = {};
    table.querySelectorAll("th.sortable").forEach(function (th) {
      th.addEventListener("click", function () {
        var col = +th.dataset.col;
        var lower = th.textContent.indexOf("↓") >= 0;
        var dir = state.col === col ? -state.dir : (lower ? 1 : -1);
        state = { col: col, dir: dir };
        table.querySelectorAll("tbody").forEach(function (tb) {
          var rows = Array.prototype.slice.call(tb.querySelectorAll("tr:not(.group)"));
          rows.sort(function (a, b) {
            var ca = a.children[col], cb = b.children[col];
            var va = ca.dataset.v, vb = cb.dataset.v;
            if (va === undefined && vb === undefined) {
              var ta = ca.textContent, tb2 = cb.textContent;
              if (!isNaN(+ta) && !isNaN(+tb2)) return dir * (+ta - +tb2);
              return dir * (ta < tb2 ? -1 : ta > tb2 ? 1 : 0);
            }
            if (va === undefined) return 1;
            if (vb === undefined) return -1;
            return dir * (+va - +vb);
          });
          rows.forEach(function (r) { tb.appendChild(r); });
        });
        table.querySelectorAll("th.sortable").forEach(function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      });
    });
  });
})();
