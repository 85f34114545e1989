// The manifest page's editor: line numbers beside the textarea, the lines the last check found errors on marked, a
// click on an error's "line N" selecting that line, and Tab indenting by two spaces (Escape, then Tab, leaves the
// editor). The page works without it: the textarea is an ordinary one and the errors say their lines.
(() => {
  const INDENT = "  ";

  function errorLines() {
    const lines = new Set();
    document.querySelectorAll("#manifest-errors [data-line]").forEach((item) => lines.add(Number(item.dataset.line)));
    return lines;
  }

  function renderGutter(editor) {
    const textarea = editor.querySelector("textarea");
    const gutter = editor.querySelector(".code-gutter");
    const count = textarea.value.split("\n").length;
    const marked = errorLines();
    const key = `${count}|${[...marked].join(",")}`;
    if (gutter.dataset.key !== key) {
      const lines = document.createDocumentFragment();
      for (let number = 1; number <= count; number += 1) {
        const line = document.createElement("span");
        line.textContent = String(number);
        if (marked.has(number)) line.className = "error-line";
        lines.append(line);
      }
      gutter.replaceChildren(lines);
      gutter.dataset.key = key;
    }
    gutter.scrollTop = textarea.scrollTop;
    textarea.classList.toggle("has-errors", marked.size > 0);
  }

  function enhance(root) {
    root.querySelectorAll(".code-editor").forEach((editor) => {
      if (editor.querySelector(".code-gutter")) return;
      const textarea = editor.querySelector("textarea[data-code-editor]");
      if (!textarea) return;
      const gutter = document.createElement("div");
      gutter.className = "code-gutter";
      gutter.setAttribute("aria-hidden", "true");
      editor.prepend(gutter);
      let escaped = false;
      textarea.addEventListener("input", () => renderGutter(editor));
      textarea.addEventListener("scroll", () => { gutter.scrollTop = textarea.scrollTop; });
      textarea.addEventListener("keydown", (event) => {
        if (event.key === "Escape") { escaped = true; return; }
        if (event.key !== "Tab" || escaped || event.shiftKey || event.ctrlKey || event.altKey || event.metaKey) {
          escaped = false;
          return;
        }
        event.preventDefault();
        textarea.setRangeText(INDENT, textarea.selectionStart, textarea.selectionEnd, "end");
        renderGutter(editor);
      });
      renderGutter(editor);
    });
  }

  function gotoLine(number) {
    const textarea = document.querySelector("textarea[data-code-editor]");
    if (!textarea) return;
    const lines = textarea.value.split("\n");
    const line = Math.min(Math.max(number, 1), lines.length);
    const start = lines.slice(0, line - 1).reduce((total, text) => total + text.length + 1, 0);
    textarea.focus();
    textarea.setSelectionRange(start, start + lines[line - 1].length);
    const height = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
    textarea.scrollTop = Math.max(0, (line - 3) * height);
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest("[data-goto-line]");
    if (!link) return;
    event.preventDefault();
    gotoLine(Number(link.dataset.gotoLine));
  });
  document.addEventListener("DOMContentLoaded", () => enhance(document));
  document.addEventListener("htmx:load", (event) => enhance(event.detail.elt));
  // A check's answer marks (or clears) the lines it found errors on.
  document.addEventListener("htmx:afterSettle", () => {
    document.querySelectorAll(".code-editor").forEach((editor) => {
      if (editor.querySelector(".code-gutter")) renderGutter(editor);
    });
  });
})();
