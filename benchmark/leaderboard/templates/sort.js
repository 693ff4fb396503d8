// Sortable leaderboard tables: a click (or Enter) on a header sorts the rows by that column, numbers as
// numbers (data-v), empty cells ("--") last; a second click reverses the order.
(function () {
  "use strict";
  function key(row, col) {
    var cell = row.children[col];
    return cell ? cell.getAttribute("data-v") : "";
  }
  function compare(a, b, numeric) {
    if (a === b) return 0;
    if (a === "") return 1;
    if (b === "") return -1;
    return numeric ? parseFloat(a) - parseFloat(b) : a.localeCompare(b);
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var numeric = rows.every(function (r) { var v = key(r, col); return v === "" || !isNaN(parseFloat(v)); });
    var current = th.getAttribute("aria-sort");
    var descending = current ? current === "ascending" : numeric;  // numbers: best first; then toggle
    rows.sort(function (a, b) {
      var c = compare(key(a, col), key(b, col), numeric);
      return descending && key(a, col) !== "" && key(b, col) !== "" ? -c : c;
    });
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    rows.forEach(function (r) { body.appendChild(r); });
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener("click", function () { sortBy(table, col, th); });
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") sortBy(table, col, th); });
    });
  });
})();
