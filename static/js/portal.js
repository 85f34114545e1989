// Small progressive enhancements; every page works without them. No inline scripts or styles anywhere: the
// Content-Security-Policy allows only this file and htmx (README "Sign-in and security").
document.addEventListener("htmx:responseError", (event) => {
  const target = event.detail.target;
  if (target) {
    target.insertAdjacentHTML("beforebegin", '<p class="message error">The server refused the request (' +
      event.detail.xhr.status + '). Reload the page and try again.</p>');
  }
});

// Bar geometry comes as data-bar-left / data-bar-width (percent); style attributes would break the policy, while
// setting element.style from a script is allowed.
function applyBarGeometry(root) {
  if (!root || !root.querySelectorAll) return;
  const elements = Array.from(root.querySelectorAll("[data-bar-left], [data-bar-width]"));
  if (root.matches && root.matches("[data-bar-left], [data-bar-width]")) elements.push(root);
  for (const element of elements) {
    if (element.dataset.barLeft !== undefined) element.style.left = element.dataset.barLeft + "%";
    if (element.dataset.barWidth !== undefined) element.style.width = element.dataset.barWidth + "%";
  }
}
document.addEventListener("DOMContentLoaded", () => applyBarGeometry(document));
document.addEventListener("htmx:load", (event) => applyBarGeometry(event.detail.elt));

// Polling that a hidden tab need not do (data-poll-when-visible), without htmx's eval-based trigger filters.
document.addEventListener("htmx:beforeRequest", (event) => {
  const element = event.detail.elt;
  if (document.visibilityState !== "visible" && element && element.hasAttribute("data-poll-when-visible")) {
    event.preventDefault();
  }
});

// Forms marked data-send-changed tell the server which field changed (_changed), e.g. the submit page's live
// check; htmx's "js:" values would need eval, which the policy refuses.
document.addEventListener("htmx:configRequest", (event) => {
  const element = event.detail.elt;
  if (element && element.hasAttribute && element.hasAttribute("data-send-changed")) {
    const source = event.detail.triggeringEvent && event.detail.triggeringEvent.target;
    event.detail.parameters["_changed"] = (source && source.name) || "";
  }
});

// Requests the page makes by itself (polling: no triggering event) do not count as activity for the session's
// idle timeout.
document.addEventListener("htmx:configRequest", (event) => {
  if (!event.detail.triggeringEvent) event.detail.headers["X-Portal-Background"] = "1";
});

// Links marked data-confirm (stop, remove) lead to a confirmation page; with this script the same question comes as
// a dialog whose form posts to the link's address (the page's view answers GET with the question, POST with the
// deed). Cancel is a method="dialog" form: it closes without a request.
document.addEventListener("click", (event) => {
  const link = event.target instanceof Element ? event.target.closest("a[data-confirm]") : null;
  const dialog = document.getElementById("confirm-dialog");
  if (!link || !dialog || typeof dialog.showModal !== "function") return;
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  dialog.querySelector("[data-confirm-question]").textContent = link.dataset.confirm;
  dialog.querySelector("[data-confirm-detail]").textContent = link.dataset.confirmDetail || "";
  dialog.querySelector("form.confirm-form").action = link.href;
  dialog.querySelector("[data-confirm-submit]").textContent = link.dataset.confirmLabel || "Confirm";
  dialog.showModal();
});

// The bar's menus (<details class="nav-group">) close when the user clicks elsewhere or presses Escape.
document.addEventListener("click", (event) => {
  for (const menu of document.querySelectorAll("details.nav-group[open]")) {
    if (!(event.target instanceof Node) || !menu.contains(event.target)) menu.removeAttribute("open");
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  for (const menu of document.querySelectorAll("details.nav-group[open]")) menu.removeAttribute("open");
});

// Column choosers (data-column-chooser="<table>"): ticking a column shows or hides every cell with that data-col in
// the table marked data-columns-table="<table>"; the choice is kept in this browser (localStorage) and applied
// again whenever htmx swaps the table in (its polls).
function chosenColumns(name) {
  try {
    return JSON.parse(window.localStorage.getItem("portal.columns." + name) || "null");
  } catch (error) {
    return null;
  }
}
function applyColumns(root) {
  if (!root || !root.querySelectorAll) return;
  for (const chooser of document.querySelectorAll("[data-column-chooser]")) {
    const name = chooser.dataset.columnChooser;
    const hidden = chosenColumns(name);
    const boxes = Array.from(chooser.querySelectorAll("[data-column-toggle]"));
    for (const box of boxes) {
      if (hidden) box.checked = !hidden.includes(box.dataset.columnToggle);
    }
    const off = boxes.filter((box) => !box.checked).map((box) => box.dataset.columnToggle);
    for (const table of document.querySelectorAll('[data-columns-table="' + name + '"]')) {
      for (const cell of table.querySelectorAll("[data-col]")) cell.hidden = off.includes(cell.dataset.col);
    }
  }
}
document.addEventListener("change", (event) => {
  const box = event.target;
  if (!box.matches || !box.matches("[data-column-toggle]")) return;
  const chooser = box.closest("[data-column-chooser]");
  const off = Array.from(chooser.querySelectorAll("[data-column-toggle]")).filter((b) => !b.checked)
    .map((b) => b.dataset.columnToggle);
  try {
    window.localStorage.setItem("portal.columns." + chooser.dataset.columnChooser, JSON.stringify(off));
  } catch (error) { /* storage refused: the choice lasts for this page only */ }
  applyColumns(document);
});
document.addEventListener("DOMContentLoaded", () => applyColumns(document));
document.addEventListener("htmx:load", () => applyColumns(document));

// A table whose rows are being ticked for a bulk action holds its poll, which would replace the ticks.
document.addEventListener("htmx:beforeRequest", (event) => {
  const element = event.detail.elt;
  if (element && element.hasAttribute && element.hasAttribute("data-poll-held-while-ticked") &&
      !event.detail.triggeringEvent && element.querySelector("input[name=ids]:checked")) {
    event.preventDefault();
  }
});
