// Small progressive enhancements; every page works without them.
document.addEventListener("htmx:responseError", (event) => {
  const target = event.detail.target;
  if (target) {
    target.insertAdjacentHTML("beforebegin", '<p class="message error">The server refused the request (' +
      event.detail.xhr.status + '). Reload the page and try again.</p>');
  }
});
