// trackfold proteome index: a sortable, filterable, paged table over the proteins embedded in the page as JSON
// (<script type="application/json" id="proteins">{"columns": [...], "rows": [[...], ...]}</script>).
// Click a header to sort (again to reverse); type in the search box (protein or template, substring) or set
// a minimum/maximum under a numeric column. Only one page of rows is in the DOM, so 100,000 proteins stay fast.
(function () {
  "use strict";
  var source = document.getElementById("proteins");
  var holder = document.getElementById("protein-table");
  if (!source || !holder) { return; }
  var data = JSON.parse(source.textContent);
  var columns = data.columns;          // [{key, label, type: "text" | "number" | "link", digits}]
  var rows = data.rows;                // arrays in column order; null = not available
  var state = {sortKey: null, descending: false, page: 0, pageSize: 100, text: "", min: {}, max: {}};
  var index = {};
  columns.forEach(function (c, i) { index[c.key] = i; });
  var BANDS = [[90, "#0053d6", "#fff"], [70, "#65cbf3", "#000"], [50, "#ffdb13", "#000"], [-1, "#ff7d45", "#000"]];

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function format(value, column) {
    if (value === null || value === undefined) { return "-"; }
    if (column.type === "number") {
      if (column.percent) { return (100 * value).toFixed(0) + "%"; }
      return column.digits ? value.toFixed(column.digits) : String(value);
    }
    return String(value);
  }
  function matches(row) {
    if (state.text) {
      var hay = "";
      columns.forEach(function (c, i) { if (c.type !== "number" && row[i] !== null) { hay += " " + row[i]; } });
      if (hay.toLowerCase().indexOf(state.text) < 0) { return false; }
    }
    for (var i = 0; i < columns.length; i++) {
      var key = columns[i].key, v = row[i];
      if (state.min[key] !== undefined && (v === null || v < state.min[key])) { return false; }
      if (state.max[key] !== undefined && (v === null || v > state.max[key])) { return false; }
    }
    return true;
  }
  function selected() {
    var chosen = rows.filter(matches);
    if (state.sortKey !== null) {
      var i = index[state.sortKey], sign = state.descending ? -1 : 1;
      chosen.sort(function (a, b) {
        var x = a[i], y = b[i];
        if (x === null && y === null) { return 0; }
        if (x === null) { return 1; }
        if (y === null) { return -1; }
        return (x < y ? -1 : x > y ? 1 : 0) * sign;
      });
    }
    return chosen;
  }

  var info = el("p", {"class": "table-info"});
  var controls = el("div", {"class": "table-controls"});
  var search = el("input", {type: "search", placeholder: "search protein or template", size: "32",
                            "aria-label": "search"});
  var size = el("select", {"aria-label": "rows per page"});
  [50, 100, 500, 1000].forEach(function (n) {
    var option = el("option", {value: String(n)}, n + " per page");
    if (n === state.pageSize) { option.selected = true; }
    size.appendChild(option);
  });
  var previous = el("button", {type: "button"}, "previous");
  var next = el("button", {type: "button"}, "next");
  controls.appendChild(search);
  controls.appendChild(size);
  controls.appendChild(previous);
  controls.appendChild(next);
  var table = el("table", {"class": "proteins"});
  var head = el("thead");
  var labels = el("tr");
  var filters = el("tr", {"class": "filters"});
  columns.forEach(function (c) {
    var th = el("th", {"data-key": c.key, "class": c.type === "number" ? "sortable" : "sortable l",
                       title: "sort"}, c.label);
    th.addEventListener("click", function () {
      state.descending = state.sortKey === c.key ? !state.descending : c.type === "number";
      state.sortKey = c.key;
      state.page = 0;
      draw();
    });
    labels.appendChild(th);
    var cell = el("th");
    if (c.type === "number") {
      ["min", "max"].forEach(function (bound) {
        var input = el("input", {type: "number", step: "any", placeholder: bound, "class": "bound",
                                 "aria-label": c.label + " " + bound});
        input.addEventListener("input", function () {
          var value = input.value === "" ? undefined : parseFloat(input.value);
          if (value !== undefined && c.percent) { value = value / 100; }
          state[bound][c.key] = value;
          state.page = 0;
          draw();
        });
        cell.appendChild(input);
      });
    }
    filters.appendChild(cell);
  });
  head.appendChild(labels);
  head.appendChild(filters);
  table.appendChild(head);
  var body = el("tbody");
  table.appendChild(body);
  holder.appendChild(controls);
  holder.appendChild(info);
  holder.appendChild(table);

  search.addEventListener("input", function () { state.text = search.value.trim().toLowerCase(); state.page = 0; draw(); });
  size.addEventListener("change", function () { state.pageSize = parseInt(size.value, 10); state.page = 0; draw(); });
  previous.addEventListener("click", function () { if (state.page > 0) { state.page--; draw(); } });
  next.addEventListener("click", function () { state.page++; draw(); });

  function draw() {
    var chosen = selected();
    var pages = Math.max(1, Math.ceil(chosen.length / state.pageSize));
    state.page = Math.min(state.page, pages - 1);
    var start = state.page * state.pageSize, stop = Math.min(chosen.length, start + state.pageSize);
    var fragment = document.createDocumentFragment();
    for (var r = start; r < stop; r++) {
      var row = chosen[r], tr = el("tr");
      columns.forEach(function (c, i) {
        var td = el("td", c.type === "number" ? {} : {"class": "l"});
        if (c.type === "link" && row[index[c.href]]) {
          td.appendChild(el("a", {href: row[index[c.href]]}, row[i]));
        } else {
          td.textContent = format(row[i], c);
        }
        if (c.bands && row[i] !== null) {
          var value = c.percent ? 100 * row[i] : row[i];
          for (var b = 0; b < BANDS.length; b++) {
            if (value > BANDS[b][0]) { td.style.background = BANDS[b][1]; td.style.color = BANDS[b][2]; break; }
          }
        }
        if (!c.hidden) { tr.appendChild(td); }
      });
      fragment.appendChild(tr);
    }
    body.replaceChildren(fragment);
    Array.prototype.forEach.call(labels.children, function (th) {
      var key = th.getAttribute("data-key");
      th.setAttribute("aria-sort", key === state.sortKey ? (state.descending ? "descending" : "ascending") : "none");
    });
    info.textContent = chosen.length + " of " + rows.length + " proteins match; showing " +
      (chosen.length ? start + 1 : 0) + "-" + stop + " (page " + (state.page + 1) + " of " + pages + ")";
    previous.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    holder.setAttribute("data-rows-shown", String(stop - start));
  }
  // hidden columns (link targets) take no header
  columns.forEach(function (c, i) {
    if (c.hidden) { labels.children[i].style.display = "none"; filters.children[i].style.display = "none"; }
  });
  draw();
  holder.setAttribute("data-status", "ready");
})();
