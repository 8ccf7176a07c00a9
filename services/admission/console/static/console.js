// Live refresh for pages that ask for it (an element with data-live-url): fetch the fragment
// every 5 s and swap it in. Same origin, no inline script (the CSP forbids it), and the page
// still works without this file.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var box = document.getElementById("auto-refresh");
  var status = document.getElementById("refreshed");
  if (!live || !live.dataset.liveUrl) { return; }
  function refresh() {
    if (box && !box.checked) { return; }
    fetch(live.dataset.liveUrl, { credentials: "same-origin", cache: "no-store", redirect: "error" })
      .then(function (response) {
        if (!response.ok) { throw new Error("status " + response.status); }
        return response.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        if (status) { status.textContent = "Refreshed at " + new Date().toISOString().slice(11, 19) + " UTC"; }
      })
      .catch(function () {
        if (status) { status.textContent = "Refresh failed; sign in again or reload the page"; }
      });
  }
  window.setInterval(refresh, 5000);
}());
