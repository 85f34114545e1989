// The training form's framework fields: a field whose input says data-framework-only="ray" shows only while Ray is
// chosen, one saying data-framework-not="ray" only while it is not (Ray takes no command or arguments). A hidden
// field's input is disabled, so neither the live check nor the submission sends what it holds. The page works without
// this script: every field shows and the server refuses the ones that do not belong to the chosen framework.
(() => {
  function applies(input, framework) {
    if (input.dataset.frameworkOnly !== undefined) return input.dataset.frameworkOnly.split(" ").includes(framework);
    return !input.dataset.frameworkNot.split(" ").includes(framework);
  }

  function toggle(form) {
    const choice = form.querySelector("select[name='framework']");
    if (!choice) return;
    const framework = choice.value || "none";
    form.querySelectorAll("[data-framework-only], [data-framework-not]").forEach((input) => {
      const shown = applies(input, framework);
      const field = input.closest(".field") || input;
      field.hidden = !shown;
      input.disabled = !shown;
    });
  }

  function enhance(root) {
    if (!root || !root.querySelectorAll) return;
    const forms = Array.from(root.querySelectorAll("form"));
    if (root.matches && root.matches("form")) forms.push(root);
    forms.filter((form) => form.querySelector("select[name='framework']")).forEach(toggle);
  }

  document.addEventListener("change", (event) => {
    const target = event.target;
    if (target instanceof HTMLSelectElement && target.name === "framework" && target.form) toggle(target.form);
  });
  document.addEventListener("DOMContentLoaded", () => enhance(document));
  // A template chosen swaps the form in (htmx): its framework decides again.
  document.addEventListener("htmx:load", (event) => enhance(event.detail.elt));
})();
