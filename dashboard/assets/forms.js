// Meridian dashboard: confirm prompts and select-all. Loaded in <head>
// without defer, as delegated handlers on the document, so they hold from
// the first row on: a list that searches streams its rows while the
// search goes on, and app.js (deferred) runs only once the page is
// complete. Delegated, they keep working after the live region is
// swapped.
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var btn = e.submitter;
    var msg = (btn && btn.getAttribute("data-confirm")) || e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) e.preventDefault();
  });
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (t.hasAttribute && t.hasAttribute("data-select-all")) {
      var boxes = document.querySelectorAll("input[type=checkbox][name=id]");
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = t.checked;
    }
  });
})();
